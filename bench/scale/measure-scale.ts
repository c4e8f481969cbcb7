/**
 * Runs the scale cases in turn against the bench's stand-ins (each case with a physics proxy and
 * Lambda pool of its own). A case that fails is recorded and the run goes on.
 */

import { fmt } from '../format.ts';
import { drainCase } from '../scenarios/scale-drain.ts';
import { manyConsumersCase } from '../scenarios/scale-many.ts';
import type { Endpoints } from '../support/standins.ts';
import type { CaseSample, ScaleConfig, ScaleSamples } from './model.ts';
import { caseFigures } from './project.ts';

type Log = (msg: string) => void;

function logCase(c: CaseSample, k: number, log: Log): void {
  const f = caseFigures(c, k);
  log(
    `scale ${c.label}: ${c.ok ? 'done' : 'NOT done'}, ${fmt(f.localPerSecond, 0)} msg/s locally ` +
      `(${fmt(f.awsPerSecond, 0)} on AWS), ${c.batches} batches, hottest ${f.hottest?.partition ?? '-'} ` +
      `${fmt((f.hottest?.share ?? Number.NaN) * 100, 0)} %, conflicts ${fmt(f.conflictsPer1000, 1)} and ` +
      `throttles ${fmt(f.throttlesPer1000, 1)} per 1,000 batches`,
  );
}

export async function measureScale(
  config: ScaleConfig,
  endpoints: Endpoints,
  log: Log,
): Promise<ScaleSamples> {
  const out: ScaleSamples = { config, cases: [], errors: [] };
  const scale = { k: config.k, transactionMs: config.transactionMs };
  const cases: [string, () => Promise<CaseSample>][] = [
    ...config.drains.map((d): [string, () => Promise<CaseSample>] => {
      const label = `(a) one consumer, batch ${d.batchSize}, maxConcurrency ${d.awsConcurrency}`;
      return [label, () => drainCase(endpoints, scale, d, label)];
    }),
    [
      `(b) ${config.many.consumers} consumers`,
      () =>
        manyConsumersCase(
          endpoints,
          scale,
          config.many,
          `(b) ${config.many.consumers} consumers on one Host`,
        ),
    ],
    [
      '(c) retry storm',
      () =>
        drainCase(
          endpoints,
          scale,
          config.storm,
          `(c) retry storm, batch ${config.storm.batchSize}, maxRetries ${config.storm.maxRetries}, delay 0`,
        ),
    ],
  ];
  for (const [label, run] of cases) {
    log(`scale ${label}: starting (k = ${config.k})`);
    try {
      const c = await run();
      out.cases.push(c);
      logCase(c, config.k, log);
    } catch (err) {
      const error = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
      out.errors.push({ scenario: label, error });
      log(`scale ${label} failed: ${error}`);
    }
  }
  return out;
}
