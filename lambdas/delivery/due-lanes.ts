/**
 * Lanes started for messages due later (a retry delay): a retry storm's finalisations all ask for
 * the same few seconds. Express names do not deduplicate, so unremembered each ask started an
 * execution, spending the account's StartExecution bucket that hand-overs and wakes share — once
 * per process, and on AWS every batch-host sandbox is a process.
 */
import { log } from '../shared/log.ts';

/**
 * One lane start per consumer for messages due later, across every process of the Host (each
 * batch-host sandbox on AWS is one): `claim` is refused while a lane due a little earlier still
 * polls when these messages return. Without it, each process starts its own lanes.
 */
export interface DueLaneClaims {
  claim(consumerUid: string, atSecond: number): Promise<boolean>;
  forget(consumerUid: string, atSecond: number): Promise<void>;
}

/** What a due lane's start may go on with: `covered` starts nothing. */
export type DueClaim = 'claimed' | 'covered' | 'unclaimed';

/** Names claimed until a time (epoch ms); forgotten once it has passed, and bounded in number. */
class DueSeconds {
  private readonly until = new Map<string, number>();

  /** True the first time `name` is claimed while its time lies ahead. */
  claim(name: string, at: number, now: number): boolean {
    if ((this.until.get(name) ?? 0) > now) return false;
    if (this.until.size >= 1_000) {
      for (const [n, t] of this.until) if (t <= now) this.until.delete(n);
      if (this.until.size >= 1_000) this.until.clear();
    }
    this.until.set(name, at);
    return true;
  }

  forget(name: string): void {
    this.until.delete(name);
  }
}

/** One start per second from this process, then (with `claims`) one per consumer's window. */
export class DueLaneStarts {
  private readonly memo = new DueSeconds();
  private readonly claims: DueLaneClaims | undefined;

  constructor(claims?: DueLaneClaims) {
    this.claims = claims;
  }

  /** Whether to start the lane `name` for messages due at `atSecond` (epoch s); `now` in ms. */
  async claim(name: string, consumerUid: string, atSecond: number, now: number): Promise<DueClaim> {
    if (!this.memo.claim(name, atSecond * 1000, now)) return 'covered';
    if (!this.claims) return 'unclaimed';
    try {
      return (await this.claims.claim(consumerUid, atSecond)) ? 'claimed' : 'covered';
    } catch (err) {
      // Without the claim this process starts its lane as before: a lane too many, never none.
      log.warn('could not claim the start of a lane for messages due later; starting it anyway', {
        consumerUid,
        err,
      });
      return 'unclaimed';
    }
  }

  /** The start failed: the next ask tries again, here and in every process. */
  async forget(name: string, consumerUid: string, atSecond: number, claim: DueClaim): Promise<void> {
    this.memo.forget(name);
    if (claim !== 'claimed') return;
    try {
      await this.claims?.forget(consumerUid, atSecond);
    } catch (err) {
      // The claim then covers its window unused: messages due in it wait for a running lane or
      // the supervisor's round.
      log.warn('could not give back the claim of a lane that did not start', { consumerUid, err });
    }
  }
}
