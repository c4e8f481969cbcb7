/**
 * Finalisation: a batch closes once, and every decision is applied with the receipt handles
 * registration recorded — acknowledged messages deleted, retried ones hidden for their delay with
 * their attempts recorded first, those out of retries owed a dead-letter move.
 */

import { newToken } from '../engine/ids.ts';
import { crashPoint } from '../shared/crash-points.ts';
import { log } from '../shared/log.ts';
import { type DeliveryContext, hashCredential, visibilityLeft } from './delivery-context.ts';
import type {
  AttemptsRecord,
  BatchHead,
  Manifest,
  ManifestEntry,
  ReleaseKind,
  SettlementCode,
} from './delivery-store.ts';
import { NamedError, recordExpiry } from './limits.ts';
import { changeVisibility, type Visibility } from './queue-requests.ts';
import type { SealedManifest } from './registration.ts';
import type { HandlerError, InvocationOutcome } from './settlement-protocol.ts';
import { manifestSealValid } from './slot-seal.ts';
import type { AcquireResult, Slot, SlotDesk } from './slots.ts';

export interface FinalizeOptions {
  /** The batch's sealed slot (the runner's copy): the Host then need not read its records. */
  slot?: Slot;
  /** The lane goes on: hand the slot to its next batch (`Finalized.next`). */
  next?: boolean;
  /** The manifest registration handed to the runner, sealed: read from the table without it. */
  manifest?: SealedManifest;
  /** The handler's error, when it threw (for the consumer's recent batches; never its stack). */
  error?: HandlerError;
  /**
   * The handler was cut off and may still run (a Lambda function's handler runs on until its
   * process exits): the batch's decisions are applied, but its slot stays held until its
   * deadline, so no other handler starts in its place meanwhile (DL-02).
   */
  handlerMayRun?: boolean;
}

export interface Finalized {
  /** Ids of messages to move to the dead-letter queue (the runner sends their bodies). */
  deadLetter: string[];
  /** The lane's next slot, when asked for and nothing is owed a move. */
  next?: AcquireResult;
}

export class Finalizer {
  private readonly c: DeliveryContext;
  private readonly slots: SlotDesk;

  constructor(c: DeliveryContext, slots: SlotDesk) {
    this.c = c;
    this.slots = slots;
  }

  /**
   * Finalisation requested by a runner: only with the batch's credential. Returns the ids of the
   * messages to move to the dead-letter queue, whose bodies the runner then sends (`deadLetter`).
   */
  async finalizeAsRunner(
    batchId: string,
    credential: string,
    outcome: InvocationOutcome,
    opts: FinalizeOptions = {},
  ): Promise<Finalized> {
    // A sealed slot brings the consumer's settings and queue; without one they are read.
    const slot = opts.slot ? this.c.trusted(opts.slot) : undefined;
    if (slot && slot.batchId !== batchId) throw new NamedError('unknown_batch', 'not a batch of this runner');
    const manifest = this.trustedManifest(batchId, opts.manifest);
    // Closing is conditional on the credential: the write that checks ownership is the close.
    const head = await this.c.o.store.closeBatch(batchId, outcome, {
      at: this.c.now(),
      credentialHash: hashCredential(credential),
      error: opts.error,
    });
    if (!head || !this.c.ownsBatch(head, credential))
      throw new NamedError('unknown_batch', 'not a batch of this runner');
    return this.apply(
      head,
      'live',
      slot,
      opts.next === true && !opts.handlerMayRun,
      manifest,
      opts.handlerMayRun,
    );
  }

  /** The runner's copy of a manifest if the Host sealed it for this batch, else undefined (read it). */
  private trustedManifest(batchId: string, sealed: SealedManifest | undefined): Manifest | undefined {
    if (!sealed) return undefined;
    const { seal, ...manifest } = sealed;
    if (!manifestSealValid(this.c.o.credentialKey, batchId, manifest, seal)) {
      throw new NamedError('unknown_batch', 'not a manifest of this batch');
    }
    return manifest;
  }

  /**
   * Closes the batch and applies every decision with the receipt handles registration recorded.
   * `live`: the runner still holds the bodies, so messages out of retries (and the batch's moves)
   * are returned as ids to move. `recovery` (the runner is gone): they are returned to the queue
   * instead, their attempts recorded, so registration moves them when they come back. Once the
   * messages may be visible again, handles may be stale: decisions are then written as attempts
   * records only, which take effect when the messages are received again.
   */
  async finalize(
    batchId: string,
    outcome: InvocationOutcome,
    mode: 'live' | 'recovery',
    error?: HandlerError,
    opts: { claimantsGone?: boolean } = {},
  ): Promise<{ deadLetter: string[] }> {
    const closed = await this.c.o.store.closeBatch(batchId, outcome, { at: this.c.now(), error });
    // A recovery fences the batch before it acts, and decides from the head as of the fence: a
    // runner whose finalisation outlived the slot's deadline can then take no move on that
    // recovery also returns, and keeps the records of moves it made (`moveToDeadLetter`).
    const head = closed && mode === 'recovery' ? await this.c.o.store.fenceRecovery(batchId) : closed;
    if (!head) return { deadLetter: [] };
    return this.apply(head, mode, undefined, false, undefined, false, opts.claimantsGone === true);
  }

  /**
   * Applies a closed batch's decisions (see `finalize`). `slot`, when the runner brought its
   * sealed slot, stands in for reading the consumer and queue. `next`: the lane goes on, so the
   * batch's slot is handed to its next batch in the same write that frees it.
   */
  private async apply(
    head: BatchHead,
    mode: 'live' | 'recovery',
    slot: Slot | undefined,
    next: boolean,
    known?: Manifest,
    keepSlot = false,
    claimantsGone = false,
  ): Promise<Finalized> {
    const batchId = head.batchId;
    const manifest: Manifest = known ??
      (await this.c.o.store.getManifest(head)) ?? { entries: [], moves: [] };
    if (head.applied) {
      if (mode === 'live') return { deadLetter: pendingIds(head, manifest) };
      await this.returnPending(head, manifest, claimantsGone);
      return { deadLetter: [] };
    }
    const spec = slot ?? (await this.c.consumer(head.consumerUid))?.spec;
    const queue = slot ?? (await this.c.queueTarget(head.queueUid));
    const now = this.c.now();
    const decided = await this.decide(head, manifest, mode, {
      keepSlot,
      maxRetries: spec?.maxRetries ?? 0,
      retryDelaySeconds: spec?.retryDelaySeconds ?? 0,
      usable: queue !== undefined && this.c.handlesValid(head, now),
      now,
    });
    if (queue) await this.applyToQueue(head, mode, queue.sqsUrl, decided, recordExpiry(now), claimantsGone);
    const { deadLetter } = decided;
    if (deadLetter.length > 0) {
      // The moves still need the bodies: the slot stays until the runner sent them — unless a
      // recovery took the batch over meanwhile; it returns them (moved on return) and frees the slot.
      if (!(await this.c.o.store.markApplied(batchId, deadLetter, { unlessRecovering: true }))) {
        return { deadLetter: [] };
      }
      return { deadLetter };
    }
    // Nothing is owed: freeing the slot ends the batch, and nothing reads `applied` of a batch
    // without a slot (were this call repeated, its writes are the same ones again).
    if (mode === 'recovery' || !slot || keepSlot) await this.c.o.store.markApplied(batchId, []);
    // Applied, its slot held to its deadline: the recovery then finds it applied and frees it.
    if (keepSlot) return { deadLetter };
    if (next && slot) {
      const handed = await this.slots.handOver(slot);
      return { deadLetter, next: handed };
    }
    await this.c.o.store.releaseSlot(
      head.consumerUid,
      batchId,
      mode === 'recovery' ? { recoveredAt: now } : {},
    );
    return { deadLetter };
  }

  /**
   * Each message's decision, its attempts record written first (exact attempts): deletes for the
   * acknowledged, visibility changes for the retried, moves for those out of retries. A record
   * that a later delivery of the message raised past this batch's count refuses the write: the
   * message was received since, so this batch's handles are stale and its decision is dropped —
   * never a visibility change or a move with them (a repeated finalisation).
   */
  private async decide(
    head: BatchHead,
    manifest: Manifest,
    mode: 'live' | 'recovery',
    o: { keepSlot: boolean; maxRetries: number; retryDelaySeconds: number; usable: boolean; now: number },
  ): Promise<Decisions> {
    const { now } = o;
    const handlesOf = (m: ManifestEntry) => (o.usable ? (m.handles ?? []) : []);
    const expires = recordExpiry(now);
    const record = (r: AttemptsRecord) => this.c.o.store.putAttempts(head.queueUid, r, expires);
    const effective = head.outcome === 'returned' && !head.doubtful ? 'returned' : 'retry-rest';
    const out: Decisions = { toDelete: [], toRelease: [], deadLetter: [] };
    // A runner whose handler may still run is ending its invocation: its moves return to the
    // queue (attempts recorded) and are made when the messages come back, as after a recovery.
    const owesMove = (m: ManifestEntry, handles: string[]) => {
      if (mode === 'live' && !o.keepSlot && handles.length > 0) out.deadLetter.push(m.id);
      else out.toRelease.push(...releasesOf(m, handles, 0));
    };
    const stale = (m: ManifestEntry) =>
      log.info('a later delivery of the message counted more attempts: this batch’s decision is stale', {
        consumerUid: head.consumerUid,
        batchId: head.batchId,
        messageId: m.id,
        attempts: m.attempts,
      });
    for (const [i, m] of manifest.entries.entries()) {
      const code: SettlementCode =
        head.settled[String(i)] ?? head.all ?? (effective === 'returned' ? 'a' : 'r');
      const handles = handlesOf(m);
      if (code === 'a') {
        if (handles.length > 0) for (const handle of handles) out.toDelete.push({ entry: m, handle });
        else await record({ id: m.id, attempts: m.attempts, acked: true });
        continue;
      }
      if (m.attempts >= 1 + o.maxRetries) {
        // Out of retries: the next step is the dead-letter move, which needs the body.
        if (await record({ id: m.id, attempts: m.attempts })) owesMove(m, handles);
        else stale(m);
        continue;
      }
      const delay = code.length > 1 ? Number(code.slice(1)) : o.retryDelaySeconds;
      const notBefore = delay > 0 ? now + delay * 1000 : undefined;
      if (!(await record({ id: m.id, attempts: m.attempts, notBefore }))) {
        stale(m);
        continue;
      }
      // A long delay is not spent in flight: the message returns after `deferAfterMs` and its
      // next receive defers it (deferrals.ts), its attempts record saying when it is due.
      const inFlight = Math.ceil(this.c.o.deferAfterMs / 1000);
      const seconds = Math.max(0, Math.min(delay, inFlight, visibilityLeft(m.receivedAt ?? now, now)));
      out.toRelease.push(...releasesOf(m, handles, seconds));
      log.info('message retried', {
        consumerUid: head.consumerUid,
        messageId: m.id,
        attempts: m.attempts,
        delaySeconds: delay,
        ...(mode === 'recovery' ? { recovery: true } : {}),
      });
    }
    for (const m of manifest.moves) owesMove(m, handlesOf(m));
    return out;
  }

  /** Deletes the acknowledged messages and releases the retried ones (`releaseOnce`). */
  private async applyToQueue(
    head: BatchHead,
    mode: 'live' | 'recovery',
    url: string,
    decided: Decisions,
    expires: number,
    claimantsGone: boolean,
  ): Promise<void> {
    const { toDelete } = decided;
    const { failed, unsent } = await this.c.deletions(
      url,
      toDelete.map((d) => d.handle),
    );
    // The runner finalises again (then the recovery): an acknowledged copy SQS kept in an
    // outage would otherwise stay in flight until the batch's hold ends (16 minutes at the
    // defaults; the oldest-message alarm counts it). Recovery, with no runner to try again,
    // leaves such a copy to be deleted on sight.
    if (unsent > 0 && mode === 'live') {
      throw new Error(`SQS did not take ${unsent} deletes of acknowledged messages; applied again`);
    }
    let acknowledged = 0;
    for (const m of new Set(toDelete.map((d) => d.entry))) {
      if ((m.handles ?? []).some((h) => failed.has(h))) {
        await this.c.o.store.putAttempts(
          head.queueUid,
          { id: m.id, attempts: m.attempts, acked: true },
          expires,
        );
      } else {
        acknowledged += 1;
        if (m.hadRecord) await this.c.o.store.clearAttempts(head.queueUid, m.id);
      }
    }
    this.c.o.delivery.acknowledged?.(head.queueUid, acknowledged);
    crashPoint('delivery.mid-finalize');
    const released = await this.releaseOnce(head.batchId, 'retried', url, decided.toRelease, claimantsGone);
    await this.c.o.delivery.hidden(
      head.consumerUid,
      head.generation,
      released.map((h) => h.seconds),
    );
  }

  /**
   * Makes a batch's visibility changes of one kind once, whoever finalises it how often: a claim
   * on the head (`claimRelease`) decides who makes them. A later finalisation (the runner's retry
   * after a lost answer, a recovery after it) makes only those the claimant left because SQS did
   * not take them — still hidden, so their handles are still the latest — and never replays one
   * SQS took: the message may have been received since, and a handle older than its last receive
   * must not change it. Throws when SQS did not take some, after leaving them to the next try.
   * A claimant that died between its claim and SQS's answer leaves the messages hidden until the
   * batch's hold ends; `claimantsGone` (the local Host starting after a dead run, before any lane
   * received) takes such a claim over and makes the changes again: no lane can have received
   * those messages since, and a change SQS took already is then made twice, to the same effect.
   */
  private async releaseOnce(
    batchId: string,
    kind: ReleaseKind,
    url: string,
    items: Release[],
    claimantsGone = false,
  ): Promise<Release[]> {
    if (items.length === 0) return [];
    const token = newToken(12);
    const claim = await this.c.o.store.claimRelease(batchId, kind, token, { takeOver: claimantsGone });
    crashPoint('delivery.after-release-claim');
    const left = claim.release === 'some' ? new Set(claim.items) : undefined;
    const mine = claim.release === 'none' ? [] : items.filter((i) => left?.has(i.key) ?? true);
    if (mine.length === 0) return [];
    const { notTaken } = await changeVisibility(this.c.o.messages, url, mine);
    if (notTaken.size > 0) {
      const untaken = mine.filter((i) => notTaken.has(i.handle)).map((i) => i.key);
      await this.c.o.store.leaveUnreleased(batchId, kind, token, untaken);
      throw new Error(`SQS did not take ${notTaken.size} visibility changes (${kind}); applied again later`);
    }
    return mine;
  }

  /**
   * The runner left before moving these: back to the queue (attempts recorded), moved on return.
   * The head is fenced (`finalize`) before they go back: a runner still moving them (its move
   * outlived the slot's deadline) reads that after its delete and keeps their records.
   */
  private async returnPending(head: BatchHead, manifest: Manifest, claimantsGone: boolean): Promise<void> {
    const pending = new Set(pendingIds(head, manifest));
    const queue = await this.c.queueTarget(head.queueUid);
    if (queue && pending.size > 0 && this.c.handlesValid(head, this.c.now())) {
      const owed = [...manifest.entries, ...manifest.moves].filter((m) => pending.has(m.id));
      await this.releaseOnce(
        head.batchId,
        'owed',
        queue.sqsUrl,
        owed.flatMap((m) => releasesOf(m, m.handles ?? [], 0)),
        claimantsGone,
      );
    }
    await this.c.o.store.markApplied(head.batchId, []);
    await this.c.o.store.releaseSlot(head.consumerUid, head.batchId, { recoveredAt: this.c.now() });
  }
}

/** The ids still owed a dead-letter move (heads of older Host versions kept manifest indexes). */
export function pendingIds(head: BatchHead, manifest: Manifest): string[] {
  return head.pendingDeadLetter.flatMap((p: string | number) =>
    typeof p === 'number' ? (manifest.entries[p]?.id ?? []) : p,
  );
}

/** One copy's visibility change, named `<id>:<copy>` (its place in the entry's handles) for claims. */
type Release = Visibility & { key: string };

const releasesOf = (m: ManifestEntry, handles: string[], seconds: number): Release[] =>
  handles.map((handle, copy) => ({ handle, seconds, key: `${m.id}:${copy}` }));

/** A closed batch's decisions as `decide` makes them. */
interface Decisions {
  toDelete: { entry: ManifestEntry; handle: string }[];
  toRelease: Release[];
  deadLetter: string[];
}
