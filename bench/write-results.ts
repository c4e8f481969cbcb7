/** Writes one run's files (JSON, Markdown, chart, latest.md) and, for a full run, the cost table of docs/costs.md. */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { renderChart } from './chart.ts';
import { markdown } from './markdown/document.ts';
import { resultsTable } from './markdown/results-table.ts';
import { PRICE_SOURCES, PRICES } from './pricing.ts';
import {
  COSTS_MARKERS,
  costsRegion,
  type RegionMarkers,
  replaceCostsRegion,
  SHAPES_MARKERS,
} from './readme-costs.ts';
import { summarise } from './report.ts';
import type { BenchConfig, BenchMeta, BenchSamples } from './results-model.ts';
import { scaleSection } from './scale/render.ts';
import { renderShapesChart } from './shapes/chart.ts';
import { shapesRegion } from './shapes/render.ts';

export interface Outputs {
  /** bench/results */
  dir: string;
  /** The page whose cost region a full run rewrites (docs/costs.md). */
  costsPage: string;
}

/**
 * Rewrites one marked region of the costs page; `region` is given the link, relative to the page,
 * of a file of the results folder. False (and a message) when the page lacks the region.
 */
export function rewritePageRegion(
  out: Outputs,
  markers: RegionMarkers,
  region: (link: (file: string) => string) => string,
): boolean {
  try {
    const link = (file: string) =>
      path.relative(path.dirname(out.costsPage), path.join(out.dir, file)).split(path.sep).join('/');
    const page = readFileSync(out.costsPage, 'utf8');
    writeFileSync(out.costsPage, replaceCostsRegion(page, region(link), markers));
    return true;
  } catch (err) {
    process.stderr.write(
      `${markers.start} of ${out.costsPage} was not rewritten: ${(err as Error).message}\n`,
    );
    return false;
  }
}

/** The traffic-shape chart beside `<base>.md`: cost per million against arrival rate. */
export const shapesChartFile = (base: string) => `${base}-rates.png`;

/** Summary, Markdown, chart and JSON of one run; prints the table; returns the exit code. */
export function writeResults(
  meta: BenchMeta,
  config: BenchConfig,
  samples: BenchSamples,
  out: Outputs,
): number {
  const summary = summarise(config, samples);
  mkdirSync(out.dir, { recursive: true });
  const base = config.mode === 'quick' ? `${meta.date}-quick` : meta.date;
  const chartFile = `${base}.png`;
  writeFileSync(
    path.join(out.dir, chartFile),
    renderChart(summary, `Takoform queue Host benchmark - ${base}`),
  );
  const shapes = summary.shapes;
  if (shapes)
    writeFileSync(
      path.join(out.dir, shapesChartFile(base)),
      renderShapesChart(shapes, `USD per million messages vs arrival rate - ${base}`),
    );
  const body = markdown(meta, config, summary, chartFile, shapes ? shapesChartFile(base) : undefined);
  const md = samples.scale ? `${body.trimEnd()}\n\n${scaleSection(samples.scale).join('\n')}\n` : body;
  writeFileSync(path.join(out.dir, `${base}.md`), md);
  if (config.mode === 'full') writeFileSync(path.join(out.dir, 'latest.md'), md);
  writeFileSync(
    path.join(out.dir, `${base}.json`),
    `${JSON.stringify({ meta, config, prices: PRICES, priceSources: PRICE_SOURCES, summary, samples }, null, 1)}\n`,
  );
  // Last, so that a page without its region never costs the run's own files.
  const full = config.mode === 'full';
  const costsOk =
    !full ||
    [
      rewritePageRegion(out, COSTS_MARKERS, (link) => costsRegion(meta, summary, link(`${base}.md`))),
      !shapes ||
        rewritePageRegion(out, SHAPES_MARKERS, (link) =>
          shapesRegion(
            meta,
            shapes,
            { results: link(`${base}.md`), chart: link(shapesChartFile(base)) },
            'npm run bench',
          ),
        ),
    ].every(Boolean);
  process.stdout.write(`\n${resultsTable(summary, true)}\n\n`);
  process.stdout.write(
    `Wall time ${meta.wallSeconds.toFixed(0)} s. Results: ${out.dir}/${base}.{json,md,png}${config.mode === 'full' ? ` and latest.md; cost table in ${out.costsPage}` : ''}\n`,
  );
  if (samples.errors.length > 0) {
    process.stdout.write(`${samples.errors.length} scenario run(s) failed; see "errors" in the JSON.\n`);
    return 1;
  }
  return costsOk ? 0 : 1;
}
