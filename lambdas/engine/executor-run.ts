/**
 * One run of the Operation executor inside a bounded invocation (on AWS, a Lambda function's
 * time): runs due Operations until none is due or the time left is short, lingers briefly for
 * Operations due within seconds, and reports what it saw of unfinished ones.
 */

/** What a look at the unfinished Operations found (bounded: it reads at most a fixed number). */
export interface OperationCensus {
  /** Unfinished Operations seen. */
  unfinished: number;
  reconciling: number;
  /** `reconciling` for longer than the threshold since acceptance. */
  stuckReconciling: number;
  /** The earliest time an unfinished Operation becomes due, if any. */
  nextDueAt: number | undefined;
}

export interface ExecutorRunOptions {
  /** Stop starting rounds when less than this is left (default 20 s: one round's lease work). */
  marginMs?: number;
  /** Wait for Operations due within this long before returning (default 10 s). */
  lingerMs?: number;
  /** An Operation counts as stuck after this long in `reconciling` (default 15 min). */
  stuckAfterMs?: number;
  clock?: () => number;
}

export interface ExecutorRunResult {
  steps: number;
  rounds: number;
  reconciling: number;
  stuckReconciling: number;
}

export interface ExecutorRunDeps {
  /** One round of the executor: runs every due Operation once; resolves to how many it ran. */
  runDue(): Promise<number>;
  census(opts: { now: number; stuckAfterMs: number }): Promise<OperationCensus>;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Runs due Operations while time remains; returns what it did and what it saw. */
export async function runDueOperations(
  deps: ExecutorRunDeps,
  remainingMs: () => number,
  opts: ExecutorRunOptions = {},
): Promise<ExecutorRunResult> {
  const clock = opts.clock ?? Date.now;
  const margin = opts.marginMs ?? 20_000;
  const linger = opts.lingerMs ?? 10_000;
  const census = () => deps.census({ now: clock(), stuckAfterMs: opts.stuckAfterMs ?? 15 * 60_000 });
  let steps = 0;
  let rounds = 0;
  let last: OperationCensus | undefined;
  while (remainingMs() > margin) {
    const worked = await deps.runDue();
    rounds++;
    steps += worked;
    if (worked > 0) continue;
    last = await census();
    const wait = last.nextDueAt === undefined ? Number.POSITIVE_INFINITY : last.nextDueAt - clock();
    if (wait > linger || remainingMs() - Math.max(0, wait) <= margin) break;
    await sleep(Math.max(50, wait));
  }
  last ??= await census();
  return { steps, rounds, reconciling: last.reconciling, stuckReconciling: last.stuckReconciling };
}
