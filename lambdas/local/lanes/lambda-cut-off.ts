/**
 * A cut-off handler as Lambda lets it run (TAKOFORM_FAULTS `localInvoke.lambdaCutOff`, on by
 * default with `localInvoke`). On AWS the worker runtime (worker-runtime/lambda-adapter.ts)
 * cannot stop a handler it cut off: it counts the batch `abandoned`, finalises it (no next slot,
 * and the lane takes none after it), gives back what it received ahead, and only then ends the
 * process, so the handler goes on running until the invocation ends; the state machine then sees
 * `Runtime.ExitError`. The local worker pool would end the handler's thread at the cut-off; under
 * the fault model the pool hands the thread here instead, and it is ended when the lane's
 * invocation ends, followed by the same error, so whatever the Host does in between happens
 * beside a handler that still runs, as on Lambda.
 */
import type { BatchHostPort } from '../../delivery/batch-runner.ts';
import { RUNTIME_EXIT_ERROR } from '../../worker-runtime/lambda-adapter.ts';

export class LambdaCutOff {
  /** The first batch cut off in this invocation. */
  private batchId: string | undefined;
  private readonly ends: (() => void)[] = [];

  /** Given to the worker pool: a handler cut off, and what ends its thread. */
  readonly hold = (batchId: string, end: () => void): void => {
    this.batchId ??= batchId;
    this.ends.push(end);
  };

  /** After a cut-off this invocation takes no further slot, as the Lambda runtime's lane does. */
  host(host: BatchHostPort): BatchHostPort {
    const cut = () => this.batchId !== undefined;
    return {
      acquire: (previous, credential) =>
        cut() ? Promise.resolve({ status: 'stop' }) : host.acquire(previous, credential),
      register: (slot, received, opts) => host.register(slot, received, opts),
      settle: (batchId, credential, call) => host.settle(batchId, credential, call),
      settleMany: (batchId, credential, calls) => host.settleMany(batchId, credential, calls),
      finalize: (slot, credential, outcome, opts) =>
        host.finalize(slot, credential, outcome, cut() ? { ...opts, next: false } : opts),
      deadLetter: (slot, credential, items) => host.deadLetter(slot, credential, items),
      defer: (slot, items) => host.defer(slot, items),
    };
  }

  /**
   * The invocation's answer: `run`'s, unless a handler was cut off — then, once `run` has ended,
   * the held threads end (the process exit on Lambda) and the invocation fails as Lambda reports it.
   */
  async ending<T>(run: Promise<T>): Promise<T> {
    let result: T | undefined;
    let failure: unknown;
    let failed = false;
    try {
      result = await run;
    } catch (err) {
      failed = true;
      failure = err;
    }
    if (this.batchId === undefined) {
      if (failed) throw failure;
      return result as T;
    }
    for (const end of this.ends.splice(0)) end();
    throw Object.assign(new Error(`the worker process ended after batch ${this.batchId} was cut off`), {
      name: RUNTIME_EXIT_ERROR,
    });
  }
}
