/**
 * A shapes-only run (`--scenario shapes`): starts the stand-ins, runs the traffic-shape cases and
 * writes `bench/results/<date>-shapes.{json,md}` and its chart (`-shapes-quick` for `--quick`).
 * The full run's files and latest.md are left alone; the region of docs/costs.md is rewritten by
 * a full run, and by `--from` whatever the run's size (the region names it).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fmt } from '../format.ts';
import { PRICE_SOURCES, PRICES } from '../pricing.ts';
import { SHAPES_MARKERS } from '../readme-costs.ts';
import type { BenchMeta } from '../results-model.ts';
import { withOwnStandIns } from '../support/own-stand-ins.ts';
import { type Outputs, rewritePageRegion, shapesChartFile } from '../write-results.ts';
import { renderShapesChart } from './chart.ts';
import { measureShapes } from './measure-shapes.ts';
import type { ShapesConfig, ShapesSamples } from './model.ts';
import { shapesCommand, shapesDocument, shapesRegion } from './render.ts';
import { summariseShapes, targetText } from './summarise.ts';

export const runShapes = (config: ShapesConfig, log: (m: string) => void): Promise<ShapesSamples> =>
  withOwnStandIns(log, (endpoints) => measureShapes(config, endpoints, log));

/** Writes the run's JSON, Markdown and chart, and the page's region when asked; returns the exit code. */
export function writeShapesResults(
  meta: BenchMeta,
  samples: ShapesSamples,
  out: Outputs,
  rewriteRegion: boolean,
): number {
  mkdirSync(out.dir, { recursive: true });
  const summary = summariseShapes(samples);
  const base = `${meta.date}-shapes${samples.config.mode === 'quick' ? '-quick' : ''}`;
  const chart = shapesChartFile(base);
  writeFileSync(
    path.join(out.dir, chart),
    renderShapesChart(summary, `USD per million messages vs arrival rate - ${base}`),
  );
  writeFileSync(path.join(out.dir, `${base}.md`), `${shapesDocument(meta, summary, chart).trimEnd()}\n`);
  writeFileSync(
    path.join(out.dir, `${base}.json`),
    `${JSON.stringify({ meta, prices: PRICES, priceSources: PRICE_SOURCES, summary, shapes: samples }, null, 1)}\n`,
  );
  const regionOk =
    !rewriteRegion ||
    rewritePageRegion(out, SHAPES_MARKERS, (link) =>
      shapesRegion(
        meta,
        summary,
        { results: link(`${base}.md`), chart: link(chart) },
        shapesCommand(summary.mode),
      ),
    );
  for (const f of summary.figures)
    process.stdout.write(
      `${f.verdict.padEnd(7)} ${f.label.padEnd(16)} $${fmt(f.perMillion.total, 3)} per million` +
        ` (Lambda + SQS ESM $${fmt(f.esm.total, 3)}, Cloudflare $${fmt(f.cloudflare, 2)}; target ${targetText(f.target)})\n`,
    );
  process.stdout.write(
    `Wall time ${meta.wallSeconds.toFixed(0)} s. Results: ${out.dir}/${base}.{json,md} and ${chart}\n`,
  );
  if (samples.errors.length > 0) {
    process.stdout.write(`${samples.errors.length} shape case(s) failed; see "errors" in the JSON.\n`);
    return 1;
  }
  return regionOk ? 0 : 1;
}
