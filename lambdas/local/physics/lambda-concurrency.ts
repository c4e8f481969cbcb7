/**
 * Lambda's concurrency pool for the local Host's function invocations (TAKOFORM_PHYSICS): the
 * account's concurrent executions (1,000 by default, divided by k) are shared by every function;
 * a function with reserved concurrency runs at most that many at once and leaves the rest of the
 * pool to the others; the unreserved rest is shared by the functions without a reservation.
 * Without `lambda.reserved`, the Host's functions hold the reservations the CDK gives them
 * (`HOST_RESERVED_CONCURRENCY`, scaled). Past either, the invocation is refused with `Lambda.TooManyRequestsException` (the name Step
 * Functions' Lambda integration reports, which the dispatcher's Retry matches) and does not run.
 *
 * One pool per process, as one account is shared by every Host function: LocalLanes wraps its
 * Task handlers (the step and worker functions) with it.
 */
import type { LocalInvokeLabel } from '../faults/fault-config.ts';
import { AWS_LIMITS, type Physics, perProcessModel } from './physics-config.ts';

export interface ConcurrencyStats {
  running: Record<LocalInvokeLabel, number>;
  peak: Record<LocalInvokeLabel, number>;
  throttled: Record<LocalInvokeLabel, number>;
  /**
   * Of `throttled`, the refusals of a function without a reservation: other functions held the
   * pool it shares (starvation). A function with one is refused only at its own reservation.
   */
  starved: Record<LocalInvokeLabel, number>;
  /** The most invocations of all functions running at once. */
  peakTotal: number;
  accountConcurrency: number;
  unreserved: number;
}

const labels = (): Record<LocalInvokeLabel, number> => ({ worker: 0, step: 0, 'batch-host': 0 });

export class LambdaConcurrency {
  private readonly running = labels();
  private readonly peak = labels();
  private readonly throttled = labels();
  private readonly starved = labels();
  private peakTotal = 0;
  private readonly account: number;
  private readonly reserved: Physics['lambda']['reserved'];
  /** What functions without a reservation share. */
  private readonly unreserved: number;

  constructor(lambda: Physics['lambda'], scale = 1) {
    this.account = lambda.accountConcurrency;
    this.reserved = lambda.reserved;
    const total = Object.values(lambda.reserved).reduce((n, r) => n + (r ?? 0), 0);
    // Lambda keeps 100 unreserved (scaled like the pool) whatever is reserved.
    const floor = Math.max(1, Math.floor(AWS_LIMITS.unreservedMinimum / scale));
    if (total > this.account - floor)
      throw new Error(
        `reserved concurrency ${total} leaves less than ${floor} of the account's ${this.account} unreserved`,
      );
    this.unreserved = this.account - total;
  }

  private admits(label: LocalInvokeLabel): boolean {
    const own = this.reserved[label];
    if (own !== undefined) return this.running[label] < own;
    const shared = (Object.keys(this.running) as LocalInvokeLabel[])
      .filter((l) => this.reserved[l] === undefined)
      .reduce((n, l) => n + this.running[l], 0);
    return shared < this.unreserved;
  }

  /** `fn` as invocations of the function `label`, refused past its share of the pool. */
  wrap<P, T>(fn: (payload: P) => Promise<T>, label: LocalInvokeLabel): (payload: P) => Promise<T> {
    return async (payload) => {
      if (!this.admits(label)) {
        this.throttled[label]++;
        if (this.reserved[label] === undefined) this.starved[label]++;
        throw Object.assign(new Error('Rate Exceeded. (TAKOFORM_PHYSICS: concurrency)'), {
          name: 'Lambda.TooManyRequestsException',
        });
      }
      this.running[label]++;
      this.peak[label] = Math.max(this.peak[label], this.running[label]);
      const total = Object.values(this.running).reduce((n, r) => n + r, 0);
      this.peakTotal = Math.max(this.peakTotal, total);
      try {
        return await fn(payload);
      } finally {
        this.running[label]--;
      }
    };
  }

  stats(): ConcurrencyStats {
    return {
      running: { ...this.running },
      peak: { ...this.peak },
      throttled: { ...this.throttled },
      starved: { ...this.starved },
      peakTotal: this.peakTotal,
      accountConcurrency: this.account,
      unreserved: this.unreserved,
    };
  }
}

/** The process's pool under TAKOFORM_PHYSICS, or undefined without it (no limit). */
export const lambdaConcurrencyFromEnv = perProcessModel((p) => new LambdaConcurrency(p.lambda, p.scale));
