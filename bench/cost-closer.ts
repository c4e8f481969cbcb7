/**
 * What one cost cell would cost without the two parts that are design choices rather than
 * per-message floors, and the write budget its target leaves — all from this run's counts.
 */
import { manifestWruPerBatch } from './part-items.ts';
import { PRICES } from './pricing.ts';
import type { CellCost, CellCounts } from './summary-model.ts';

export interface CostCloser {
  /** The manifest's write (every receipt handle), USD per million messages. */
  handlesUsd: number;
  stepFunctionsUsd: number;
  /** The cell's total without both. */
  withoutBoth: number;
  /**
   * What no design that records every receipt handle before its handler runs can go below: SQS's
   * send, receive and delete of every message (one request per 10 each), the manifest as measured
   * and the producer's writes — before any Lambda, Step Functions or other write.
   */
  floorUsd: number;
  /** WRU per batch the target leaves for the Host's writes, with lanes that run on and every other part as measured (may be < 0). */
  wruBudgetPerBatch: number;
  /** WRU per batch measured, the manifest's included. */
  wruPerBatch: number;
  manifestWruPerBatch: number;
  /** Lane executions started (AcquireSlot), batches and transitions per lane. */
  lanes: number;
  batchesPerLane: number;
  transitionsPerLane: number;
}

/** SendMessageBatch, ReceiveMessage and DeleteMessageBatch carry at most 10 messages each. */
export const SQS_FLOOR_REQUESTS_PER_MESSAGE = 0.3;

export function costCloser(
  breakdown: CellCost['breakdown'],
  counts: CellCounts,
  limit: number,
  producerWruPer100: number,
  tailTransitionsPerLane = 0,
): CostCloser {
  const msgs = Math.max(1e-9, counts.messagesPerBatch.median);
  const manifestWru = manifestWruPerBatch(counts.breakdown);
  const handlesUsd = (manifestWru / msgs) * PRICES.dynamoWritePerMillionWru;
  const producerUsd = (producerWruPer100 / 100) * PRICES.dynamoWritePerMillionWru;
  // Lanes that run on cost next to no transitions per batch; the rest stays as measured.
  const othersUsd = breakdown.total - breakdown.dynamoWrites - breakdown.stepFunctions + producerUsd;
  const lanes = counts.breakdown.lambda['step:AcquireSlot'] ?? 0;
  const batchesPerLane = counts.breakdown.batches / Math.max(1, lanes);
  return {
    handlesUsd,
    stepFunctionsUsd: breakdown.stepFunctions,
    withoutBoth: breakdown.total - handlesUsd - breakdown.stepFunctions,
    floorUsd: SQS_FLOOR_REQUESTS_PER_MESSAGE * PRICES.sqsPerMillionRequests + handlesUsd + producerUsd,
    wruBudgetPerBatch: ((limit - othersUsd) / PRICES.dynamoWritePerMillionWru) * msgs,
    wruPerBatch: counts.perBatch.wru.median,
    manifestWruPerBatch: manifestWru,
    lanes,
    batchesPerLane,
    // The drain's window and the lanes' ends after it.
    transitionsPerLane: counts.perBatch.transitions.median * batchesPerLane + tailTransitionsPerLane,
  };
}
