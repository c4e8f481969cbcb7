/**
 * Recovery of batches whose runner is lost: at the slot's deadline (the supervisor's round, and
 * registration and acquisition, which find expired slots), when a lane's worker invocation failed
 * (RecoverBatch), and for every slot when the local Host starts after a dead run. What a recovered
 * batch owes is applied by `DeliveryService.finalize` in recovery mode: settled messages keep their
 * settlement, unsettled ones are retried with their attempt counted, owed moves return.
 */
import { log } from '../shared/log.ts';
import type { BatchHead, DeliveryStore } from './delivery-store.ts';
import type { InvocationOutcome } from './settlement-protocol.ts';
import type { UnfinishedBatch } from './unfinished-batch.ts';

export interface BatchRecoveryDeps {
  store: DeliveryStore;
  now: () => number;
  /** Closes the batch (if open) with `outcome`, fences it and applies what it owes (recovery mode). */
  finalize: (
    batchId: string,
    outcome: InvocationOutcome,
    opts?: { claimantsGone?: boolean },
  ) => Promise<unknown>;
}

/**
 * The batches a lane runs in one worker invocation share their first batch's id as a prefix
 * (`<root>.<suffix>`), so the lane's recovery finds whichever slot it held when the invocation
 * failed.
 */
export const laneRootOf = (batchId: string) => batchId.split('.')[0] as string;
const inLane = (root: string, batchId: string) => batchId === root || batchId.startsWith(`${root}.`);

/**
 * How long a runner may take from closing its batch to having applied it. A batch its runner
 * closed longer ago and still holds a slot lost its runner on the way (an answer lost after the
 * close, an invocation whose caller saw a failure while it went on).
 */
export const APPLY_GRACE_MS = 30_000;

/**
 * Whether the batch's runner is known to be done with it from its head alone: the runner closed
 * it with the handler's outcome (it closes only after the handler returned or threw; a cut-off
 * closes it `abandoned`, whose handler may still run), and either applied it with no dead-letter
 * move left to make or had time to. Waiting for the slot's deadline then protects nothing and
 * stalls the consumer for up to the worker timeout, every slot of it when maxConcurrency is small.
 * An applied batch that still owes moves is the runner's until the grace has passed: its move may
 * be under way, and returning those messages now has them moved a second time on their return.
 */
export function endedPerHead(head: BatchHead | undefined, now: number): boolean {
  if (!head?.closed || head.closedBy !== 'runner') return false;
  if (head.outcome !== 'returned' && head.outcome !== 'threw') return false;
  if (head.applied && head.pendingDeadLetter.length === 0) return true;
  return head.closedAt !== undefined && head.closedAt <= now - APPLY_GRACE_MS;
}

export interface RecoverOptions {
  /** The batch's invocation is known to have ended (its handler no longer runs). */
  ended?: boolean;
  outcome?: InvocationOutcome;
  /** The slot deadline the caller saw pass. */
  expired?: number;
  /**
   * Every runner of the batch is gone and no lane has received since (the local Host starting
   * after a dead run): visibility changes a runner claimed but may not have made are made now.
   */
  claimantsGone?: boolean;
}

export class BatchRecovery {
  private readonly d: BatchRecoveryDeps;

  constructor(deps: BatchRecoveryDeps) {
    this.d = deps;
  }

  /**
   * Finishes every batch of a consumer whose slot deadline passed: unsettled messages are retried.
   * With `bound` (the supervisor's round: the consumer's maxConcurrency), when the live slots leave
   * none free, it also reads their heads and finishes the batches whose handler has ended
   * (`endedPerHead`): a slot kept after a failed invocation is then freed within a round, not at
   * its deadline. A consumer with a free slot pays no read.
   */
  async recoverExpired(consumerUid: string, opts: { bound?: number } = {}): Promise<number> {
    const now = this.d.now();
    let recovered = 0;
    const live: string[] = [];
    for (const [batchId, deadline] of Object.entries(await this.d.store.slots(consumerUid))) {
      if (deadline > now) {
        live.push(batchId);
        continue;
      }
      await this.recoverBatch(consumerUid, batchId, { expired: deadline });
      recovered++;
    }
    if (opts.bound === undefined || live.length < opts.bound) return recovered;
    for (const batchId of live) {
      const head = await this.d.store.getHead(batchId);
      if (!endedPerHead(head, this.d.now())) continue;
      const r = await this.recoverBatch(consumerUid, batchId, { ended: true });
      if (r.heldUntil === undefined) recovered++;
    }
    return recovered;
  }

  /**
   * The local Host at start-up: every slot in the table was taken by an earlier run of this
   * Host, whose worker threads died with it (the data folder's lock proves no other run is
   * alive), so each of its batches is recovered now instead of at its deadline. Settled messages
   * keep their settlement; unsettled ones return at once with their attempt counted.
   */
  async recoverAfterRestart(): Promise<number> {
    let recovered = 0;
    for (const consumerUid of await this.d.store.consumersWithSlots()) {
      for (const batchId of Object.keys(await this.d.store.slots(consumerUid))) {
        await this.recoverBatch(consumerUid, batchId, { ended: true, claimantsGone: true });
        recovered++;
      }
    }
    if (recovered > 0)
      log.info('recovered the batches a previous run left in flight', { batches: recovered });
    return recovered;
  }

  /**
   * Ends one batch whose invocation was lost: closes it as abandoned and records what is owed.
   * Before the slot's deadline the batch's handler may still run (a lost Lambda response, or a
   * duplicate invocation whose twin failed), so nothing of it is touched until then — neither its
   * slot nor its settlements, which that handler may still make — unless the caller knows the
   * invocation has `ended`. A caller that saw the slot's deadline pass names it as `expired`: if
   * the slot holds another deadline now, its lane registered the batch since (late, but alive)
   * and nothing is recovered.
   */
  async recoverBatch(
    consumerUid: string,
    batchId: string,
    opts: RecoverOptions = {},
  ): Promise<{ heldUntil?: number }> {
    const state = await this.d.store.dispatchState(consumerUid);
    if (state.slots[batchId] === undefined) return {}; // finished meanwhile
    if (opts.expired !== undefined && state.slots[batchId] !== opts.expired) return {};
    if (!state.registered[batchId]) {
      // No batch registered in it: no handler runs in it, and a runner that registers late is
      // refused (registration needs the slot), so it is freed now rather than at its deadline.
      // If the release fails, a registration won the race: its runner is alive and runs the
      // batch, and recovery at its deadline covers it should that runner be lost later (DL-02).
      // Freed, the slot can no longer be marked, so a head its runner wrote before it was lost
      // (between the head and the mark) is of a batch that never starts: taken back.
      if (await this.d.store.releaseUnregistered(consumerUid, batchId)) {
        await this.d.store.takeBackHead(batchId);
      }
      return {};
    }
    const deadline = state.slots[batchId] as number;
    const head = await this.d.store.getHead(batchId);
    if (deadline > this.d.now() && !opts.ended && !endedPerHead(head, this.d.now())) {
      // Keep the slot — and so the concurrency bound — until the deadline. A handler still
      // running finishes and finalises as usual; if none does, recoverExpired closes the batch
      // as abandoned then and applies what is owed.
      log.info('a batch’s invocation failed; its consumer waits for the batch’s deadline', {
        consumerUid,
        batchId,
        until: new Date(deadline).toISOString(),
      });
      return { heldUntil: deadline };
    }
    if (head && (!head.applied || head.pendingDeadLetter.length > 0)) {
      // Unsettled messages are retried, never acknowledged — unless the runner reported how its
      // ended handler finished; pending dead-letter moves return.
      await this.d.finalize(batchId, opts.outcome ?? 'abandoned', {
        claimantsGone: opts.claimantsGone === true,
      });
      log.info('batch recovered', {
        consumerUid,
        batchId,
        outcome: head.outcome ?? opts.outcome ?? 'abandoned',
        ...(opts.ended ? { handlerEnded: true } : {}),
      });
      return {};
    }
    if (head) {
      await this.d.store.releaseSlot(consumerUid, batchId, { recoveredAt: this.d.now() });
      return {};
    }
    // Marked registered without a head: registration writes the head first, so only one expired
    // (or an older Host) leaves this. Nothing runs in it.
    await this.d.store.releaseSlot(consumerUid, batchId, { recoveredAt: this.d.now() });
    return {};
  }

  /**
   * RecoverBatch: a lane's worker invocation failed. Whichever of the lane's batches held a slot
   * then is recovered; `heldUntil` is the latest deadline of one that keeps its slot (its handler
   * may still run), which the lane waits for before it takes a slot again.
   */
  async recoverLane(
    consumerUid: string,
    batchId: string,
    unfinished?: UnfinishedBatch,
  ): Promise<{ heldUntil?: number }> {
    const root = laneRootOf(batchId);
    let heldUntil: number | undefined;
    for (const id of Object.keys(await this.d.store.slots(consumerUid))) {
      if (!inLane(root, id)) continue;
      // Only the batch the runner reported as ended is applied now; the others of the lane may
      // belong to another attempt of the same invocation whose handler still runs.
      const ended = unfinished?.batchId === id ? { ended: true, outcome: unfinished.outcome } : {};
      const r = await this.recoverBatch(consumerUid, id, ended);
      if (r.heldUntil !== undefined) heldUntil = Math.max(heldUntil ?? 0, r.heldUntil);
    }
    return heldUntil !== undefined ? { heldUntil } : {};
  }
}
