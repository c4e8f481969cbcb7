/** Writes one run's files (JSON, Markdown, chart, latest.md) and, for a full run, the cost table of docs/costs.md. */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { renderChart } from './chart.ts';
import { markdown } from './markdown/document.ts';
import { resultsTable } from './markdown/results-table.ts';
import { PRICE_SOURCES, PRICES } from './pricing.ts';
import { costsRegion, replaceCostsRegion } from './readme-costs.ts';
import { summarise } from './report.ts';
import type { BenchConfig, BenchMeta, BenchSamples } from './results-model.ts';
import { scaleSection } from './scale/render.ts';
import type { Summary } from './summary-model.ts';

export interface Outputs {
  /** bench/results */
  dir: string;
  /** The page whose cost region a full run rewrites (docs/costs.md). */
  costsPage: string;
}

/** Rewrites the page's cost region; false (and a message) when the page has none. */
function rewriteCostsPage(meta: BenchMeta, summary: Summary, base: string, out: Outputs): boolean {
  try {
    const link = path
      .relative(path.dirname(out.costsPage), path.join(out.dir, `${base}.md`))
      .split(path.sep)
      .join('/');
    const page = readFileSync(out.costsPage, 'utf8');
    writeFileSync(out.costsPage, replaceCostsRegion(page, costsRegion(meta, summary, link)));
    return true;
  } catch (err) {
    process.stderr.write(`the cost table of ${out.costsPage} was not rewritten: ${(err as Error).message}\n`);
    return false;
  }
}

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
  const md = samples.scale
    ? `${markdown(meta, config, summary, chartFile).trimEnd()}\n\n${scaleSection(samples.scale).join('\n')}\n`
    : markdown(meta, config, summary, chartFile);
  writeFileSync(path.join(out.dir, `${base}.md`), md);
  if (config.mode === 'full') writeFileSync(path.join(out.dir, 'latest.md'), md);
  writeFileSync(
    path.join(out.dir, `${base}.json`),
    `${JSON.stringify({ meta, config, prices: PRICES, priceSources: PRICE_SOURCES, summary, samples }, null, 1)}\n`,
  );
  // Last, so that a page without its region never costs the run's own files.
  const costsOk = config.mode !== 'full' || rewriteCostsPage(meta, summary, base, out);
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
