/**
 * The bench's targets: reported with met or missed beside each figure, never asserted in tests,
 * because a shared machine's figures move from run to run.
 */
import type { Summary, Verdict } from '../summary-model.ts';

export const TARGETS = {
  throughputRatio: [
    { batchSize: 100, concurrency: 10, atLeast: 0.7 },
    { batchSize: 10, concurrency: 10, atLeast: 0.3 },
  ],
  handlerUtilisation: 0.9,
  dynamoRequestsPerBatch: 6,
  /** USD per million messages, by batch size (every concurrency). */
  usdPerMillion: { 10: 0.6, 100: 0.3 } as Record<number, number>,
  /** A Host with one idle consumer, and each further idle consumer, USD a month. */
  idleMonthlyUsd: 1,
  idleConsumerMonthlyUsd: 0.2,
  /** Send → handler on an idle consumer: at most maxBatchTimeoutSeconds plus this. */
  arrivalSlackMs: 1000,
  /** acknowledge() p99 at most this many times the bare conditional write's p99. */
  acknowledgeP99Ratio: 2,
  /**
   * USD per million messages by arrival rate: at a message a second or more, Cloudflare Queues'
   * price and a multiple of Lambda with an SQS event source mapping; below it, a bound.
   */
  shapes: { streamUsdPerMillion: 1.2, esmRatio: 3, trickleUsdPerMillion: 10 },
} as const;

/** A figure that could not be measured (NaN) is not judged rather than missed. */
export function judge(value: number, ok: (v: number) => boolean): Verdict {
  return Number.isFinite(value) ? (ok(value) ? 'met' : 'missed') : '—';
}

/** Targets met out of targets judged, for the summary line. */
export function targetCount(summary: Pick<Summary, 'rows'>): { met: number; judged: number } {
  const judged = summary.rows.filter((r) => r.target && r.verdict !== '—');
  return { met: judged.filter((r) => r.verdict === 'met').length, judged: judged.length };
}
