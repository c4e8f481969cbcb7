/**
 * The reserved concurrency each Host function gets by default: the one definition shared by the
 * CDK constructs (`TakoformHost`) and the local Host's Lambda pool under TAKOFORM_PHYSICS, so the
 * model refuses what AWS would. Pure data, no imports: safe to load from CDK code and bundles.
 *
 * Why reserve at all: every lane holds a worker invocation for as long as its queue has messages,
 * and workers draw on the account's unreserved pool. Consumers whose maxConcurrency sum past that
 * pool would otherwise leave no room for the functions that run delivery itself (the step
 * function lanes call between invocations, the batch host every runner calls synchronously), the
 * API and the executor. A reservation is also a ceiling, so each figure is what the function
 * needs at the scale the default account pool (1,000) allows, not more.
 */
export const HOST_RESERVED_CONCURRENCY = {
  /** Requests in flight at once; API Gateway's stage throttle (100 rps) keeps it far below this. */
  api: 10,
  /**
   * One AcquireSlot/RecoverBatch/HandOver per worker invocation, each a few DynamoDB calls, and a
   * burst of AcquireSlot when a round starts many lanes at once. At 20, a consumer at
   * maxConcurrency 250 and 1,000 consumers on one Host had step invocations refused and lanes
   * fail after the state machine's retries (scale bench); `C / 5` covers them.
   */
  step: 50,
  /**
   * Register, settle, finalize and produce calls of running batches, each synchronous; a runner
   * has about one in flight, so this bounds how many batches run their Host calls at once.
   */
  batchHost: 100,
  /** The per-minute schedule and the retries of its Operations. */
  executor: 5,
  /** One round at a time (a lease guards that); the second is for a round starting at the end of the last. */
  supervisor: 2,
} as const;

export type HostFunctionRole = keyof typeof HOST_RESERVED_CONCURRENCY;

/** What Lambda keeps unreserved in every account, whatever functions reserve. */
export const LAMBDA_UNRESERVED_MINIMUM = 100;

/** The reservations together: an account needs this plus 100 (and its workers' share) at least. */
export const HOST_RESERVED_TOTAL = Object.values(HOST_RESERVED_CONCURRENCY).reduce((a, b) => a + b, 0);
