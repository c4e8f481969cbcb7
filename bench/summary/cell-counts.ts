/**
 * Per-batch counts of every measured cell — each drain and each steady stream — and the
 * DynamoDB-requests-per-batch row each of them is judged by.
 */

import { fmtSpread } from '../format.ts';
import { isDelivery, type PerBatch, partBreakdown, perBatchOf, spreadPerBatch } from '../per-batch.ts';
import { usd } from '../pricing.ts';
import type { BenchConfig, BenchSamples, SteadyPair, ThroughputPair } from '../results-model.ts';
import type { SteadySetting } from '../scenarios/steady.ts';
import type { Cell } from '../scenarios/throughput.ts';
import type { CellCounts, Row } from '../summary-model.ts';
import { spread } from '../support/stats.ts';
import { cellId, cellKey, steadyId, steadyLabel } from './cells.ts';
import { costOfPair } from './cost.ts';
import { cpuPerBatch, withCpu } from './cpu-per-batch.ts';
import { pairsOfSetting } from './steady.ts';
import { judge, TARGETS } from './targets.ts';
import { hostDrains } from './throughput.ts';

/** Drain cells: per-batch counts from each run's drain, beside the raw loop of the same run. */
function drainCounts(cell: Cell, pairs: ThroughputPair[]): CellCounts {
  const runs: PerBatch[] = pairs.map((p) => perBatchOf(p.host.drain, p.host.batches));
  return {
    kind: 'drain',
    label: `drain, ${cellKey(cell.batchSize, cell.concurrency)}`,
    id: cellId(cell.batchSize, cell.concurrency),
    batchSize: cell.batchSize,
    concurrency: cell.concurrency,
    messagesPerBatch: spread(pairs.map((p) => p.host.delivered / Math.max(1, p.host.batches))),
    perBatch: spreadPerBatch(runs),
    baselineSqsPerBatch: spread(
      pairs.map((p) =>
        p.baseline.batches ? (p.baseline.receives + p.baseline.deletes) / p.baseline.batches : Number.NaN,
      ),
    ),
    perMillion: spread(pairs.map((p) => costOfPair(p).perMillion.total)),
    breakdown: partBreakdown(
      pairs.map((p) => p.host.drain),
      pairs.reduce((a, p) => a + p.host.batches, 0),
    ),
    ...withCpu(cpuPerBatch(pairs)),
  };
}

/** Steady cells: counts inside each run's window, per batch finalised in it. */
function steadyCounts(setting: SteadySetting, pairs: SteadyPair[]): CellCounts {
  return {
    kind: 'steady',
    label: steadyLabel(setting),
    id: steadyId(setting),
    batchSize: setting.batchSize,
    concurrency: setting.concurrency,
    rate: setting.rate,
    messagesPerBatch: spread(pairs.map((p) => p.host.batchMessages / Math.max(1, p.host.batches))),
    perBatch: spreadPerBatch(pairs.map((p) => perBatchOf(p.host.tally, p.host.batches))),
    baselineSqsPerBatch: spread(
      pairs.map((p) => (p.baseline.receives + p.baseline.deletes) / Math.max(1, p.baseline.batches)),
    ),
    perMillion: spread(
      pairs.map((p) => (usd(p.host.tally, isDelivery).total * 1e6) / Math.max(1, p.host.batchMessages)),
    ),
    breakdown: partBreakdown(
      pairs.map((p) => p.host.tally),
      pairs.reduce((a, p) => a + p.host.batches, 0),
    ),
  };
}

/** Every drain cell, then every steady setting, that has at least one finished run. */
export function measuredCells(config: BenchConfig, s: BenchSamples, okSteady: SteadyPair[]): CellCounts[] {
  const cells: CellCounts[] = [];
  for (const cell of config.cells) {
    const pairs = hostDrains(s.throughput, cell);
    if (pairs.length > 0) cells.push(drainCounts(cell, pairs));
  }
  for (const setting of config.steady?.settings ?? []) {
    const pairs = pairsOfSetting(okSteady, setting);
    if (pairs.length > 0) cells.push(steadyCounts(setting, pairs));
  }
  return cells;
}

/** The raw loop makes no DynamoDB requests, so its baseline is zero rather than unmeasured. */
export const dynamoRows = (cells: CellCounts[]): Row[] =>
  cells.map((c) => {
    const v = c.perBatch.dynamoRequests;
    return {
      key: `dynamo:${c.kind}:${c.id}`,
      group: 'Per batch',
      figure: 'DynamoDB requests per batch, happy path (return = acknowledge)',
      setting: `${c.label}, ${fmtSpread(c.messagesPerBatch, 1)} msgs/batch`,
      unit: '',
      host: v,
      baselineLabel: 'raw receive+delete loop',
      baseline: spread([0]),
      target: `≤ ${TARGETS.dynamoRequestsPerBatch}`,
      verdict: judge(v.median, (x) => x <= TARGETS.dynamoRequestsPerBatch),
      digits: 1,
    };
  });
