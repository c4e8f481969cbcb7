import type { InvocationOutcome } from './settlement-protocol.ts';

/**
 * A runner whose handler has ended but who could not finalise the batch (the Host's table was
 * unreachable past its retries) fails its invocation with this error. The state machine's
 * RecoverBatch passes the failure on, and recovery then applies the batch at once with the
 * handler's outcome instead of keeping its slot until the deadline: with the worker timeout at
 * its default, that wait would stall the consumer for 15 minutes after a short outage.
 *
 * Only a function error of the failed invocation itself counts (Lambda's `{errorType,
 * errorMessage}` Cause, or the plain message): a lost response (`Lambda.ServiceException`) or a
 * timeout says nothing about whether a handler still runs. The claim is the runner's, which runs
 * beside the worker's own code: a worker that forged it could only end its own batch early.
 */
export const BATCH_UNFINISHED = 'Takoform.BatchUnfinished';

const OUTCOMES: readonly InvocationOutcome[] = ['returned', 'threw', 'abandoned'];
const MESSAGE = /^batch (\S{1,256}) is unfinished \((returned|threw|abandoned)\)/;

export interface UnfinishedBatch {
  batchId: string;
  outcome: InvocationOutcome;
}

export class BatchUnfinishedError extends Error {
  constructor(batchId: string, outcome: InvocationOutcome, cause: unknown) {
    super(`batch ${batchId} is unfinished (${outcome}): its handler ended; the Host could not apply it`, {
      cause,
    });
    this.name = BATCH_UNFINISHED;
  }
}

/** The batch a failed InvokeWorker reports as ended but unfinished, from the Catch's `{Error, Cause}`. */
export function unfinishedBatchOf(
  failure: { Error?: string; Cause?: string } | undefined,
): UnfinishedBatch | undefined {
  if (failure?.Error !== BATCH_UNFINISHED || typeof failure.Cause !== 'string') return undefined;
  let message: unknown = failure.Cause;
  try {
    // Lambda reports a function error as JSON: {"errorType":…,"errorMessage":…,"trace":[…]}.
    const parsed: unknown = JSON.parse(failure.Cause);
    if (parsed && typeof parsed === 'object' && 'errorMessage' in parsed) message = parsed.errorMessage;
  } catch {
    // A plain message.
  }
  const m = typeof message === 'string' ? MESSAGE.exec(message) : null;
  if (!m) return undefined;
  const outcome = m[2] as InvocationOutcome;
  return OUTCOMES.includes(outcome) ? { batchId: m[1] as string, outcome } : undefined;
}
