/**
 * The shape of a run's summary: the rows of the results table with their verdicts, and the
 * per-cell, cost, utilisation and idle figures the report and the explanations quote. It is
 * written into `bench/results/<date>.json` beside the raw samples.
 */
import type { PartBreakdown, PerBatchFigure } from './per-batch.ts';
import type { CostBreakdown } from './pricing.ts';
import type { ShapesSummary } from './shapes/model.ts';
import type { Spread } from './support/stats.ts';

export type Verdict = 'met' | 'missed' | '—';

export interface Row {
  /** A stable name for the explanations: `throughput:100x10`, `dynamo:drain:10x1`, `cost:10x1`, … */
  key?: string;
  group: string;
  figure: string;
  setting: string;
  unit: string;
  host: Spread;
  baselineLabel?: string;
  baseline?: Spread;
  ratio?: Spread;
  target?: string;
  verdict: Verdict;
  digits: number;
}

export interface CellCost {
  cell: string;
  batchSize: number;
  concurrency: number;
  perMillion: Spread;
  breakdown: CostBreakdown;
  sqsPerMessage: Spread;
  rruPerMessage: Spread;
  wruPerMessage: Spread;
  /** After the last message, per lane: `rounds` are worker invocations started then (a lane going round again). */
  tailPerLane: { transitions: number; lambda: number; sqs: number; dynamoCalls: number; rounds: number };
}

/** Per-batch counts of one cell, drain or steady stream, beside its same-run baseline. */
export interface CellCounts {
  kind: 'drain' | 'steady';
  /** `drain, batch 10 / concurrency 1` or `steady 200 msg/s, batch 10 / concurrency 10`. */
  label: string;
  /** `10x1`, the key part of the rows about this cell. */
  id: string;
  batchSize: number;
  concurrency: number;
  rate?: number;
  messagesPerBatch: Spread;
  perBatch: Record<PerBatchFigure, Spread>;
  /** The raw loop's SQS requests per batch (it makes no DynamoDB, Step Functions or Lambda calls). */
  baselineSqsPerBatch: Spread;
  perMillion: Spread;
  breakdown: PartBreakdown;
  /** Drains measured with CPU times: CPU per batch of each process, beside the raw loop's. */
  cpu?: CpuPerBatch;
}

/** CPU milliseconds per batch over a drain, and the cores that kept busy on average. */
export interface CpuPerBatch {
  /** The bench process: the Host's Node main thread (SDK calls, Host logic) and its worker threads. */
  host: Spread;
  dynamodb: Spread;
  sqs: Spread;
  all: Spread;
  cores: Spread;
  /** The raw loop, every process (it runs in the bench process and uses the SQS stand-in only). */
  baseline: Spread;
  baselineCores: Spread;
}

export interface UtilisationDetail {
  meanHandlerMs: Spread;
  meanSlotMs: Spread;
  peakHandlers: number;
  maxConcurrency: number;
  cpu?: CpuPerBatch;
}

/** One idle lane's whole life, averaged over the lane-end runs. */
export interface LaneEndCost {
  idleWaitSeconds: number;
  transitions: number;
  lambda: number;
  sqs: number;
  dynamoCalls: number;
  usd: number;
  gbSeconds: number;
}

export interface IdleSummary {
  hostWithOneIdleConsumer: Spread;
  perExtraConsumer: Spread;
  /** Monthly USD by part: a Host with one idle consumer, and what one more adds. */
  breakdownOne: CostBreakdown;
  breakdownExtra: CostBreakdown;
  perRound: Record<string, number>;
  marginalPerRound: Record<string, number>;
  roundMs: Spread;
  laneEnd?: LaneEndCost;
}

export interface Summary {
  rows: Row[];
  costs: CellCost[];
  cells: CellCounts[];
  /** The producer's calls per 100 messages sent (sendBatch of 100), from the pre-fills. */
  producerPer100: Record<string, { calls: number; wru: number }>;
  utilisationDetail: UtilisationDetail | undefined;
  idle: IdleSummary;
  /** Per-run Host ÷ baseline throughput ratios of each drain cell (`100x10` → ratios). */
  throughputRatios: Record<string, number[]>;
  /** SDK calls the Host made per settlement call (mean over the settle-latency runs). */
  callsPerSettle: Record<string, number>;
  /** Cost by traffic shape, when the run measured it. */
  shapes?: ShapesSummary;
}
