/**
 * Step Functions' StartExecution quota for the local lanes (TAKOFORM_PHYSICS): a token bucket per
 * kind of state machine, shared by every lane start of the process as the account's is shared by
 * every Host of the account. A start without a token is refused with `ThrottlingException`, as
 * the service refuses it; the caller's SDK retries it (`startWithSdkRetries`).
 *
 * One budget per process, as one account's quota is shared by every Host function.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { LaneKind } from '../../delivery/lane-kinds.ts';
import { type Physics, perProcessModel } from './physics-config.ts';
import { TokenBucket } from './token-bucket.ts';

export interface StartExecutionStats {
  /** Starts that got a token, by kind. */
  admitted: Record<LaneKind, number>;
  /** Tries refused for want of one (each SDK retry counts again). */
  throttled: Record<LaneKind, number>;
  /** Starts refused on every try: the caller saw the error. */
  failed: Record<LaneKind, number>;
}

const perKind = (): Record<LaneKind, number> => ({ standard: 0, express: 0 });

export class StartExecutionBudget {
  private readonly buckets: Record<LaneKind, TokenBucket>;
  private readonly counts = { admitted: perKind(), throttled: perKind(), failed: perKind() };
  private readonly clock: () => number;

  constructor(limits: Physics['startExecution'], clock: () => number = Date.now) {
    this.clock = clock;
    const now = clock();
    this.buckets = {
      standard: new TokenBucket(limits.standard.perSecond, now, limits.standard.bucket),
      express: new TokenBucket(limits.express.perSecond, now, limits.express.bucket),
    };
  }

  /** One try: whether a start of `kind` gets a token now. */
  take(kind: LaneKind): boolean {
    const ok = this.buckets[kind].take(this.clock());
    this.counts[ok ? 'admitted' : 'throttled'][kind]++;
    return ok;
  }

  /**
   * A start as the AWS SDK makes it (standard retry mode, 3 tries): a throttled try is retried
   * after a jittered exponential delay from a 500 ms base, as the SDK waits after throttling
   * errors; the third refusal fails the call with the service's error.
   */
  async startWithSdkRetries<T>(kind: LaneKind, start: () => T): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      if (this.take(kind)) return start();
      if (attempt >= SDK_MAX_ATTEMPTS) {
        this.counts.failed[kind]++;
        throw Object.assign(new Error('Rate exceeded (TAKOFORM_PHYSICS: StartExecution)'), {
          name: 'ThrottlingException',
        });
      }
      await sleep(Math.floor(Math.random() * Math.min(SDK_MAX_DELAY_MS, THROTTLE_BASE_MS * 2 ** attempt)));
    }
  }

  stats(): StartExecutionStats {
    return {
      admitted: { ...this.counts.admitted },
      throttled: { ...this.counts.throttled },
      failed: { ...this.counts.failed },
    };
  }
}

const SDK_MAX_ATTEMPTS = 3;
const THROTTLE_BASE_MS = 500;
const SDK_MAX_DELAY_MS = 20_000;

/** The process's budget under TAKOFORM_PHYSICS, or undefined without it (no limit). */
export const startExecutionBudgetFromEnv = perProcessModel((p) => new StartExecutionBudget(p.startExecution));
