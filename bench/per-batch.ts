/**
 * What the Host spends per finalised batch, from the meter's counts: DynamoDB requests and
 * request units, Step Functions transitions, Lambda invocations and SQS requests, and the same
 * calls split by the part of the Host that made them. The producer's sends are counted per send,
 * not per batch, so they stay out of these figures (they are in the cost per message).
 */
import { transitionsOf } from './pricing.ts';
import { addTallies, foldKinds, type SdkTally, sumSdk, type Tally } from './support/meter.ts';
import { type Spread, spread } from './support/stats.ts';

/** Contexts whose calls are not part of delivering messages (setup, probes, the supervisor). */
const NOT_DELIVERY = new Set(['setup', 'control-plane', 'teardown', 'supervisor', 'probe']);
export const isDelivery = (context: string) => !NOT_DELIVERY.has(context);
/** Delivery minus the producer: the work that happens once per batch. */
export const isBatchWork = (context: string) => isDelivery(context) && context !== 'producer';

export const PER_BATCH_FIGURES = [
  'dynamoRequests',
  'wru',
  'rru',
  'transitions',
  'lambda',
  'sqsRequests',
] as const;
export type PerBatchFigure = (typeof PER_BATCH_FIGURES)[number];

export const PER_BATCH_LABELS: Record<PerBatchFigure, string> = {
  dynamoRequests: 'DynamoDB requests',
  wru: 'WRU',
  rru: 'RRU',
  transitions: 'Step Functions transitions',
  lambda: 'Lambda invocations',
  sqsRequests: 'SQS requests',
};

export type PerBatch = Record<PerBatchFigure, number>;

/** One run's per-batch figures. Writes refused by a condition count 1 WRU each, as AWS bills them. */
export function perBatchOf(t: Tally, batches: number): PerBatch {
  const sdk = sumSdk(t, isBatchWork);
  const n = Math.max(1, batches);
  const lambda = Object.values(t.lambda).reduce((a, l) => a + l.invocations, 0);
  return {
    dynamoRequests: sdk.dynamoCalls / n,
    wru: (sdk.wru + sdk.refusedWrites) / n,
    rru: sdk.rru / n,
    transitions: transitionsOf(t) / n,
    lambda: lambda / n,
    sqsRequests: sdk.sqsRequests / n,
  };
}

/** Medians with min and max over runs, figure by figure. */
export function spreadPerBatch(runs: PerBatch[]): Record<PerBatchFigure, Spread> {
  return Object.fromEntries(PER_BATCH_FIGURES.map((f) => [f, spread(runs.map((r) => r[f]))])) as Record<
    PerBatchFigure,
    Spread
  >;
}

/** Every run of one cell summed: calls by part and operation, transitions by state, invocations by role. */
export interface PartBreakdown {
  batches: number;
  ops: Record<string, Record<string, SdkTally>>;
  transitions: Record<string, number>;
  lambda: Record<string, number>;
}

export function partBreakdown(tallies: Tally[], batches: number): PartBreakdown {
  const all = addTallies(tallies);
  const ops = Object.fromEntries(Object.entries(all.sdk).filter(([context]) => isBatchWork(context)));
  return {
    batches,
    ops,
    transitions: all.transitions,
    lambda: Object.fromEntries(Object.entries(all.lambda).map(([role, l]) => [role, l.invocations])),
  };
}

/** DynamoDB operations that only read; every other operation is counted as a write. */
export const READ_OPS: ReadonlySet<string> = new Set([
  'GetItem',
  'BatchGetItem',
  'Query',
  'Scan',
  'TransactGetItems',
]);

/** DynamoDB requests per batch of one part, split into reads and writes. */
export function dynamoOfPart(b: PartBreakdown, part: string): { reads: number; writes: number } {
  let reads = 0;
  let writes = 0;
  for (const [key, e] of Object.entries(b.ops[part] ?? {})) {
    if (!key.startsWith('DynamoDB:')) continue;
    if (READ_OPS.has(key.slice('DynamoDB:'.length))) reads += e.calls;
    else writes += e.calls;
  }
  const n = Math.max(1, b.batches);
  return { reads: reads / n, writes: writes / n };
}

/** Parts that made DynamoDB requests, most requests first. */
export function dynamoParts(b: PartBreakdown): { part: string; reads: number; writes: number }[] {
  return Object.keys(b.ops)
    .map((part) => ({ part, ...dynamoOfPart(b, part) }))
    .filter((p) => p.reads + p.writes > 0)
    .sort((x, y) => y.reads + y.writes - (x.reads + x.writes) || x.part.localeCompare(y.part));
}

/** "ATTACH 1.00, RES 2.00": the items a call named per batch, by kind. */
export function itemsPerBatch(e: SdkTally, batches: number, digits = 2): string {
  return Object.entries(foldKinds(e.items))
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([kind, n]) => `${kind} ${(n / Math.max(1, batches)).toFixed(digits)}`)
    .join(', ');
}
