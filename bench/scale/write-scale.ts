/**
 * A scale-only run (`--scenario scale`): starts the stand-ins, runs the scale cases and writes
 * `bench/results/<date>-scale.{json,md}` (`-scale-quick` for `--quick`). The full run's files,
 * latest.md and docs/costs.md are left alone.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { BenchMeta } from '../results-model.ts';
import { warmThreads, workerFile } from '../support/bench-host.ts';
import { withOwnStandIns } from '../support/own-stand-ins.ts';
import { SLEEP_WORKER, THROWING_WORKER } from '../support/workers.ts';
import { measureScale } from './measure-scale.ts';
import type { ScaleConfig, ScaleSamples } from './model.ts';
import { localLanes } from './project.ts';
import { scaleDocument } from './render.ts';
import { scaleTargetRows } from './targets.ts';

/** Threads for the largest local lane count, started before any window. */
export async function warmScaleThreads(config: ScaleConfig): Promise<void> {
  const lanes = Math.max(...config.drains.map((d) => localLanes(d.awsConcurrency, config.k)));
  await warmThreads(workerFile(SLEEP_WORKER), lanes);
  await warmThreads(workerFile(THROWING_WORKER), localLanes(config.storm.awsConcurrency, config.k));
}

export function runScale(config: ScaleConfig, log: (m: string) => void): Promise<ScaleSamples> {
  return withOwnStandIns(log, async (endpoints) => {
    await warmScaleThreads(config);
    return measureScale(config, endpoints, log);
  });
}

/** Writes the run's JSON and Markdown; returns the exit code (1 when a case failed). */
export function writeScaleResults(meta: BenchMeta, samples: ScaleSamples, dir: string): number {
  mkdirSync(dir, { recursive: true });
  const base = `${meta.date}-scale${samples.config.mode === 'quick' ? '-quick' : ''}`;
  writeFileSync(path.join(dir, `${base}.md`), scaleDocument(meta, samples));
  writeFileSync(
    path.join(dir, `${base}.json`),
    `${JSON.stringify({ meta, scale: samples, targets: scaleTargetRows(samples) }, null, 1)}\n`,
  );
  const rows = scaleTargetRows(samples);
  for (const r of rows)
    process.stdout.write(`${r.verdict.padEnd(7)} ${r.figure}: ${r.value} (target ${r.target})\n`);
  process.stdout.write(`Wall time ${meta.wallSeconds.toFixed(0)} s. Results: ${dir}/${base}.{json,md}\n`);
  if (samples.errors.length > 0) {
    process.stdout.write(`${samples.errors.length} scale case(s) failed; see "errors" in the JSON.\n`);
    return 1;
  }
  return 0;
}
