/**
 * Registration: what a lane received becomes a batch — each message delivered now with its exact
 * attempt number, hidden until later, or owed a dead-letter move — recorded before any handler
 * runs, and only while the consumer generation is the active one.
 */

import { crashPoint } from '../shared/crash-points.ts';
import { log } from '../shared/log.ts';
import { digestOf } from './batch-digest.ts';
import {
  type DeliveryContext,
  hashCredential,
  SKEW_ALLOWANCE_MS,
  visibilityLeft,
} from './delivery-context.ts';
import {
  type AttemptsRecord,
  type BatchHead,
  BatchRegisteredAlready,
  type Manifest,
  type ManifestEntry,
  ManifestNotWritten,
} from './delivery-store.ts';
import type { Envelope } from './envelope.ts';
import { NamedError } from './limits.ts';
import type { OnlyCopies } from './ports.ts';
import { returnNow } from './queue-requests.ts';
import { classifyReceived, type ReceiveDecisions } from './receive-classification.ts';
import { type RegistrationClock, registrationClock } from './registration-clock.ts';
import { repeatedRegistration } from './registration-repeat.ts';
import { manifestSeal } from './slot-seal.ts';
import {
  type AcquireResult,
  dueWatchUntil,
  laneContextOf,
  nextBatchId,
  receivingLanes,
  type Slot,
  type SlotDesk,
} from './slots.ts';

/** How a runner registers what it received. */
export interface RegisterOptions {
  /** The lane goes on: an empty receive that a send woke takes the lane's next slot at once. */
  goOn?: boolean;
  /**
   * How long, from the call, the first of the received messages stays hidden. Registration must
   * be done by then: once a message is visible again another lane may receive it and register
   * it with the same attempt number.
   */
  visibleForMs?: number;
}

/** A message as the runner received it from SQS. */
export interface Received {
  receiptHandle: string;
  receivedAt: number;
  /** SQS's SentTimestamp: when the queue accepted the message, by SQS's clock, not a producer's. */
  sentAt?: number;
  /** SQS's id of this copy: a send sent twice leaves copies of one Host message under two. */
  queueMessageId?: string;
  envelope: Omit<Envelope, 'body'>;
}

export interface Registration {
  /** The batch credential, handed only to the runner (never through the state machine). */
  credential: string;
  /** The slot's deadline from registration on: the handler must end before it. */
  deadline?: number;
  /** Indexes into the received list, in batch order, with their attempt numbers. */
  deliver: { received: number; attempts: number }[];
  /** The queue was empty, but a send through the Host came after the slot was taken. */
  woken?: boolean;
  /** Messages due much later, for the runner to defer with their bodies (`deferrals.ts`). */
  defer?: ReceiveDecisions['defer'];
  /**
   * Woken, for a lane that goes on: its next slot, taken in the same call. It knows the wake
   * count read then, so its own empty receive is woken only by a later send (exactly, in any shard).
   */
  next?: AcquireResult;
  /**
   * Fewer than maxConcurrency slots were held when it registered: another lane may start.
   * Decided for a full receive (maxBatchSize messages), the only case the control loop asks.
   */
  room?: boolean;
  /**
   * Every slot was held, by the latest count registration had: no other lane could start on
   * more messages now, so the runner may receive its next batch while this one runs.
   */
  saturated?: boolean;
  /**
   * Other lanes of the consumer receiving (slots taken, no batch registered) when registration
   * read every slot: what a lane whose take saw one shard (`SlotSnapshot.partial`) knows of them.
   */
  receiving?: number;
  /**
   * Received messages that already had their last delivery. They belong to the batch and are
   * moved when it is finalised (the runner holds their bodies).
   */
  moves: number;
  /** What registration recorded, sealed: the runner hands it back to `finalize` (no read then). */
  manifest?: SealedManifest;
}

/** A batch's manifest with the Host's seal (`slot-seal.ts`). */
export type SealedManifest = Manifest & { seal: string };

/** A registration's reads (`registrationReads`), with every slot when they were asked for. */
interface RegistrationRead {
  committed: Set<string>;
  onlyCopies: Map<string, OnlyCopies>;
  outstanding: number;
  held?: number;
  slots?: Record<string, number>;
  registered?: Record<string, boolean>;
  recoveredAt?: number;
}

/** Complete commits a Host process remembers (ids of about 20 bytes: well under 1 MB). */
const COMMITS_REMEMBERED = 20_000;

export class Registrar {
  /** Commits known to be complete, with the copies they name (see `registrationReads`). */
  private readonly commitsSeen = new Map<string, OnlyCopies | undefined>();

  private readonly c: DeliveryContext;
  private readonly slots: SlotDesk;

  constructor(c: DeliveryContext, slots: SlotDesk) {
    this.c = c;
    this.slots = slots;
  }

  /**
   * The consumer's slots a registration must recover before it reads attempts records. Within
   * half the grace of the take, the slot's sealed snapshot says it (the grace argument in
   * docs/design/control-loop.md): a batch whose messages can be back in the queue now was registered before
   * the take, and its deadline had passed by then. Later, the slot map is read after the receive,
   * and a slot no longer in it (revoked: its consumer is stopping) gives its messages back. A
   * snapshot of one shard (`partial`) says nothing of the others: then every shard is read, with
   * the attempts count and commits in the same request (`reads`), which stand unless a recovery
   * may have written records between the items' reads (`register`).
   */
  private async slotsAtRegistration(
    slot: Slot,
    now: number,
    received: Received[],
    giveBack: () => Promise<unknown>,
  ): Promise<{
    held: number;
    due: Record<string, number>;
    read: boolean;
    reads?: RegistrationRead;
    receiving?: number;
  }> {
    if (slot.taken !== undefined && !slot.taken.partial && now - slot.taken.at <= this.c.o.graceMs / 2)
      return { ...slot.taken, read: false };
    let slots: Record<string, number>;
    let reads: RegistrationRead | undefined;
    let receiving: number | undefined;
    if (slot.taken?.partial) {
      const startedAt = this.c.now();
      const read = await this.registrationReads(slot.queueUid, received, {
        consumerUid: slot.consumerUid,
        maxConcurrency: slot.maxConcurrency,
      });
      slots = read.slots ?? {};
      receiving = receivingLanes(read, slot.batchId, now);
      // A recovery that freed a slot after this read began may have written attempts records
      // after the count was read (the items of one read are not read at one instant).
      const raced = read.recoveredAt !== undefined && read.recoveredAt >= startedAt - SKEW_ALLOWANCE_MS;
      if (!raced) reads = read;
    } else {
      slots = await this.c.o.store.slots(slot.consumerUid);
    }
    if (slots[slot.batchId] === undefined) {
      await giveBack();
      throw new NamedError('unknown_batch', 'no such slot is open');
    }
    const due = Object.entries(slots).filter(([id, d]) => id !== slot.batchId && d <= now);
    return {
      held: Object.keys(slots).length,
      due: Object.fromEntries(due),
      read: true,
      ...(reads && due.length === 0 ? { reads } : {}),
      ...(receiving !== undefined ? { receiving } : {}),
    };
  }

  /**
   * Whether another lane may start (the control loop asks only after a full receive). A snapshot
   * from before the gathering can be stale by the lanes started meanwhile, so where it shows room
   * a full batch confirms it with the slot map as read after the receive (`heldAfterReceive`,
   * read with the registration's other reads), as the loop had before the snapshot. A cohort's
   * first batch has none: the lanes started with it may not all hold their slot yet.
   */
  private roomFor(
    slot: Slot,
    slots: { held: number; read: boolean },
    received: number,
    heldAfterReceive: number | undefined,
  ): boolean {
    if (slots.held >= slot.maxConcurrency || slot.cohort) return false;
    if (slots.read) return true;
    if (received < slot.maxBatchSize) return false;
    return heldAfterReceive !== undefined && heldAfterReceive < slot.maxConcurrency;
  }

  /**
   * Decides, for each received message, whether it is delivered now, later, or dead-lettered.
   * The slot is trusted only with its seal (DL-09); that its consumer generation is still the
   * active one is a condition of the registration's write of its slot, not a read before it.
   */
  async register(claimed: Slot, received: Received[], opts: RegisterOptions = {}): Promise<Registration> {
    const sealed = this.c.trusted(claimed);
    if (received.length === 0) return this.releaseEmpty(sealed, opts.goOn === true);
    const now = this.c.now();
    const clock = registrationClock(now, opts.visibleForMs, () => this.c.now());
    const slots = await this.recoverDue(sealed, now, received, clock);
    if (!slots || clock.tooLate()) return this.giveUp(sealed, received);
    // From registration on the slot lasts as long as the handler may run, and its messages stay
    // hidden a grace period longer (only the Host's own records decide how long).
    const running = now + sealed.handlerMs + this.c.o.slotMarginMs;
    // Not sealed (an empty seal never verifies): this copy with the new deadline stays in here.
    const slot: Slot = { ...sealed, deadline: running, invisibleUntil: running + this.c.o.graceMs, seal: '' };
    // Whether another lane may start is asked only after a full receive whose snapshot showed
    // room (`roomFor`); the slot map is then read in the same request as the reads below.
    const askRoom =
      !slots.read && !slot.cohort && slots.held < slot.maxConcurrency && received.length >= slot.maxBatchSize;
    // A short batch asks too (lanes in other shards since the take are in no snapshot of its
    // own): its lane may leave the next idle wait to a lane receiving now (`leavesIdleWait`).
    const askReceiving = !slots.read && slot.maxConcurrency > 1 && received.length < slot.maxBatchSize;
    const read =
      slots.reads ??
      (await this.registrationReads(
        slot.queueUid,
        received,
        askRoom || askReceiving
          ? { consumerUid: slot.consumerUid, maxConcurrency: slot.maxConcurrency }
          : undefined,
      ));
    const { committed, onlyCopies, outstanding, held } = read;
    const receiving = slots.read
      ? slots.receiving
      : askReceiving && read.slots
        ? receivingLanes(read, slot.batchId, now)
        : undefined;
    const records =
      outstanding > 0
        ? await this.c.o.store.getAttempts(
            slot.queueUid,
            received.map((r) => r.envelope.id),
          )
        : new Map<string, AttemptsRecord>();
    const decisions = classifyReceived(received, {
      committed,
      onlyCopies,
      records,
      now,
      maxRetries: sealed.maxRetries,
      commitTimeoutMs: this.c.o.commitTimeoutMs,
      deferAfterMs: this.c.o.deferAfterMs,
    });
    const defer = decisions.defer.length > 0 ? { defer: decisions.defer } : {};
    if (clock.tooLate()) return this.giveUp(sealed, received);
    await this.hideAndRemove(slot, decisions);
    const { entries: delivered, moves: moved } = decisions;
    if (delivered.length === 0 && moved.length === 0)
      return { ...(await this.releaseEmpty(sealed, false)), ...defer };
    const credential = this.c.credentialOf(slot.batchId);
    const manifest: Manifest = { entries: delivered, moves: moved };
    let created: boolean;
    try {
      created = await this.createBatch(slot, credential, manifest);
    } catch (err) {
      // Registered before: by this call's own first try, whose answer was lost, if the batch
      // holds exactly these messages — then answered as that try was.
      const hold = (head: BatchHead, owned: ManifestEntry[]) =>
        this.holdUntil({ ...slot, invisibleUntil: head.invisibleUntil }, owned, this.c.now());
      const repeat =
        err instanceof BatchRegisteredAlready
          ? await repeatedRegistration(this.c, sealed, received, hold)
          : undefined;
      if (repeat === 'slot refused') {
        // The call's own batch, which its slot refused (a stop or an update came between its
        // head and its mark): it never starts, as when the first try was refused.
        await this.c.changeVisibility(slot.sqsUrl, returnNow([...delivered, ...moved]));
        await this.c.o.store.releaseSlot(slot.consumerUid, slot.batchId);
        return { credential: '', deliver: [], moves: 0 };
      }
      if (repeat) return repeat;
      throw err;
    }
    if (!created) return { credential: '', deliver: [], moves: 0 };
    // The runner received with a short visibility, so the messages of a runner that dies before
    // registration return by themselves. Registered, they are held past the deadline — after the
    // records exist, so that a crash between the two leaves a batch recovery can return at once,
    // never messages hidden for a whole worker timeout with nothing that knows them.
    const lost = await this.holdUntil(slot, [...delivered, ...moved], now);
    if (lost.size > 0) {
      // SQS refused even the retries: such a copy may come back while its handler runs (a
      // duplicate delivery, which at-least-once allows; recovery still knows its handles).
      log.warn('could not hold messages of a registered batch', {
        batchId: slot.batchId,
        messages: lost.size,
      });
    }
    if (clock.visibilityEnded()) return this.takeBack(slot, manifest);
    crashPoint('delivery.after-register');
    return {
      credential,
      deadline: slot.deadline,
      deliver: decisions.deliver,
      moves: moved.length,
      room: this.roomFor(slot, slots, received.length, held),
      saturated: (slots.read || held === undefined ? slots.held : held) >= slot.maxConcurrency,
      ...(receiving !== undefined ? { receiving } : {}),
      ...defer,
      manifest: { ...manifest, seal: manifestSeal(this.c.o.credentialKey, slot.batchId, manifest) },
    };
  }

  /**
   * Late recovery: a batch abandoned by a lost runner has its messages back in the queue from
   * its deadline + grace on. Recovering such slots before reading attempts records means such a
   * message is never counted from records its recovery has not written yet.
   */
  private async recoverDue(sealed: Slot, now: number, received: Received[], clock: RegistrationClock) {
    const giveBack = () =>
      this.c.changeVisibility(
        sealed.sqsUrl,
        received.map((r) => ({ handle: r.receiptHandle, seconds: 0 })),
      );
    const slots = await this.slotsAtRegistration(sealed, now, received, giveBack);
    for (const [batchId, d] of Object.entries(slots.due)) {
      // Many batches expired at once (a broken deploy): the rest is left to later takes.
      if (clock.tooLate()) return undefined;
      await this.c.recoverBatch(sealed.consumerUid, batchId, { expired: d });
    }
    return slots;
  }

  /**
   * A registration that could not be done before its messages' visibility ends registers
   * nothing: no attempt is counted, the messages go back (a no-op for any another lane holds by
   * now) and the slot, which holds no batch, is freed.
   */
  private async giveUp(slot: Slot, received: Received[]): Promise<Registration> {
    log.warn('registration gave up: its messages’ visibility would end first', {
      consumerUid: slot.consumerUid,
      batchId: slot.batchId,
      messages: received.length,
    });
    await this.c.changeVisibility(
      slot.sqsUrl,
      received.map((r) => ({ handle: r.receiptHandle, seconds: 0 })),
    );
    // Only while it holds no batch: registered, it is another runner's of the same slot.
    await this.c.o.store.releaseUnregistered(slot.consumerUid, slot.batchId);
    return { credential: '', deliver: [], moves: 0 };
  }

  /**
   * The batch was created, but its messages' visibility may have ended before they were held:
   * another lane may hold them now, with the same attempt numbers. Its credential never left the
   * Host, so the batch is taken back whole (head and slot), and what is still this batch's returns.
   */
  private async takeBack(slot: Slot, manifest: Manifest): Promise<Registration> {
    log.warn('registration taken back: its messages’ visibility ended before they were held', {
      consumerUid: slot.consumerUid,
      batchId: slot.batchId,
    });
    if (!(await this.c.o.store.cancelBatch(slot.consumerUid, slot.batchId))) {
      throw new NamedError('unknown_batch', 'the batch was closed while it registered');
    }
    await this.c.changeVisibility(slot.sqsUrl, returnNow([...manifest.entries, ...manifest.moves]));
    return { credential: '', deliver: [], moves: 0 };
  }

  /** Applies what the receive's classification hides and removes, before the batch is created. */
  private async hideAndRemove(slot: Slot, decisions: ReceiveDecisions): Promise<void> {
    await this.c.changeVisibility(slot.sqsUrl, decisions.hide);
    await this.c.o.delivery.hidden(
      slot.consumerUid,
      slot.generation,
      decisions.hide.map((h) => h.seconds),
    );
    const notRemoved = await this.c.deleteMessages(slot.sqsUrl, decisions.remove);
    for (const d of decisions.removeAcked) {
      // A copy that could not be deleted comes back: its record must still say it is done.
      if (!d.handles.some((h) => notRemoved.has(h))) await this.c.o.store.clearAttempts(slot.queueUid, d.id);
    }
  }

  /**
   * Manifest, head and the slot's `registered` mark (`DeliveryStore.createBatch`), the mark on
   * condition that the consumer generation is still active. A slot revoked at the stop boundary
   * (QC-08), a stop or an update of the consumer, or a head that exists already make it fail, and
   * then this batch never starts: false, with its messages back in the queue. Throws when it
   * cannot be told.
   */
  private async createBatch(slot: Slot, credential: string, manifest: Manifest): Promise<boolean> {
    const { entries: delivered, moves: moved } = manifest;
    const head: BatchHead = {
      batchId: slot.batchId,
      consumerUid: slot.consumerUid,
      queueUid: slot.queueUid,
      generation: slot.generation,
      credentialHash: hashCredential(credential),
      size: delivered.length,
      closed: false,
      outcome: undefined,
      applied: false,
      settled: {},
      all: undefined,
      deadline: slot.deadline,
      invisibleUntil: slot.invisibleUntil,
      doubtful: false,
      pendingDeadLetter: [],
      digest: digestOf({ entries: delivered, moves: moved }, slot.maxRetries),
    };
    let created: boolean;
    try {
      created = await this.c.o.store.createBatch(head, { entries: delivered, moves: moved });
    } catch (err) {
      if (err instanceof ManifestNotWritten) {
        // Nothing of the batch was registered: its messages go back as they came, and its slot
        // is freed now rather than when gathering would have ended — unless it holds a batch,
        // which is then another runner's of the same slot (a duplicate InvokeWorker), still live.
        await this.c.changeVisibility(slot.sqsUrl, returnNow([...delivered, ...moved]));
        await this.c.o.store.releaseUnregistered(slot.consumerUid, slot.batchId).catch((cause: unknown) =>
          // Its gathering deadline frees it then (within about a minute) if this did not.
          log.warn('could not free the slot of a batch that was not registered', {
            consumerUid: slot.consumerUid,
            batchId: slot.batchId,
            err: cause,
          }),
        );
        throw err;
      }
      // Registered already, or the writes may have committed with an answer lost. If the
      // batch names these very receipts, it is this registration's: its messages must not go back
      // (another batch would deliver them with the same attempt). If it names others, a second
      // runner of the lane (a duplicate InvokeWorker) holds this slot's batch: what this runner
      // received goes back now, not when its short visibility ends, and its call is refused.
      // Refused outright for a batch registered before: a replay of this call (or, when its
      // receipts cannot be compared, maybe one) is refused as it was, its messages left to it.
      if (err instanceof NamedError) {
        if ((await this.whoseBatch(slot.batchId, manifest)) !== 'other') throw err;
        await this.c.changeVisibility(slot.sqsUrl, returnNow([...delivered, ...moved]));
        throw err;
      }
      const whose = await this.whoseBatch(slot.batchId, manifest);
      if (whose !== 'ours') {
        await this.c.changeVisibility(slot.sqsUrl, returnNow([...delivered, ...moved]));
        if (whose === 'other') throw new NamedError('unknown_batch', 'this batch is registered already');
        throw err;
      }
      // Its head is written; the slot's mark, the last write, may not be: made sure of now.
      created = await this.c.o.store.markBatchSlot(head);
    }
    if (!created) {
      await this.c.changeVisibility(slot.sqsUrl, returnNow([...delivered, ...moved]));
      // A slot the consumer's stop or update left behind: freed now (a no-op if it was revoked).
      await this.c.o.store.releaseSlot(slot.consumerUid, slot.batchId);
    }
    return created;
  }

  /**
   * A slot whose receive brought nothing to deliver: freed in one write. A send through the Host
   * after the slot was taken may have missed this receive: the lane then takes another slot
   * instead of ending (`woken`) — here, for a lane that goes on, so it receives again in the same
   * invocation rather than through another round of the state machine.
   */
  private async releaseEmpty(slot: Slot, goOn: boolean): Promise<Registration> {
    const after = await this.c.o.store.releaseIdle(slot.consumerUid, slot.batchId);
    // Another runner of this slot (a duplicate InvokeWorker) registered a batch in it: the slot
    // is that batch's until it ends, and this runner's lane ends here.
    if (after.registered) return { credential: '', deliver: [], moves: 0 };
    // A slot that knows the wake count (taken in the first shard, or after a woken release)
    // compares counts; one in another shard, whose take did not see the count, the last wake's
    // time with the take's (a wake just before it only costs one more receive).
    const sent =
      slot.wakeSeq !== undefined && after.wakes !== undefined
        ? after.wakes > slot.wakeSeq
        : slot.taken !== undefined &&
          after.lastWakeAt !== undefined &&
          after.lastWakeAt >= slot.taken.at - SKEW_ALLOWANCE_MS;
    // A due lane's claim covering now refused other lanes on the promise that one polls then; its
    // own lane may have found every slot held, by lanes that each polled once and ended. Read after
    // the release, as the count is: the lane goes on, its next take watching to the window's end.
    const due = dueWatchUntil(after.dueLaneAt, this.c.now(), this.c.o.idleWaitSeconds) !== undefined;
    const woken = sent || due;
    const nothing: Registration = { credential: '', deliver: [], moves: 0, ...(woken ? { woken } : {}) };
    if (!woken || !goOn || !(await this.slots.stillActive(slot))) return nothing;
    // Without a count to compare, a slot outside the first shard is woken by any send within the
    // skew allowance before its take; its successor carries the count read now instead, so the
    // same send does not wake the lane again and again.
    const next = await this.slots.take(
      laneContextOf(slot),
      nextBatchId(slot.batchId),
      undefined,
      after.wakes,
    );
    return { ...nothing, next };
  }

  /**
   * The queue's count of attempts records, and the commits of multi-message sends among
   * `received` that are complete, in one read. A commit, once written, stays: those seen are
   * remembered (a bounded set), with the copies it names, so the batches of one large send read
   * its commit once.
   */
  private async registrationReads(
    queueUid: string,
    received: Received[],
    slotsOf: { consumerUid: string; maxConcurrency: number } | undefined,
  ): Promise<RegistrationRead> {
    const ids = [...new Set(received.flatMap((r) => (r.envelope.commit ? [r.envelope.commit] : [])))];
    const committed = new Set(ids.filter((c) => this.commitsSeen.has(c)));
    const named = new Map<string, OnlyCopies>();
    for (const c of committed) {
      const copies = this.commitsSeen.get(c);
      if (copies) named.set(c, copies);
    }
    const missing = () => ids.filter((c) => !committed.has(c));
    const read = await this.c.o.store.registrationReads(queueUid, missing(), slotsOf);
    for (const c of read.committed) committed.add(c);
    for (const [c, copies] of read.onlyCopies ?? []) named.set(c, copies);
    if (committed.size < ids.length) {
      // A receive can overtake the producer's commit write by milliseconds: look once more.
      await new Promise((r) => setTimeout(r, 250));
      for (const c of await this.c.o.commits.committed(missing(), named)) committed.add(c);
    }
    if (this.commitsSeen.size + committed.size > COMMITS_REMEMBERED) this.commitsSeen.clear();
    for (const c of committed) this.commitsSeen.set(c, named.get(c));
    return {
      committed,
      onlyCopies: named,
      outstanding: read.outstanding,
      ...(read.held !== undefined ? { held: read.held } : {}),
      ...(read.slots !== undefined ? { slots: read.slots } : {}),
      ...(read.registered !== undefined ? { registered: read.registered } : {}),
      ...(read.recoveredAt !== undefined ? { recoveredAt: read.recoveredAt } : {}),
    };
  }

  /**
   * Whose the batch registered under this id is: `ours` when its manifest names exactly these
   * receipt handles (this registration's own earlier try), `other` when it names others (another
   * runner of the same slot), `none` when no head exists; `unknown` when the table could not be
   * read, asked a few times over ~12 s (after a lost answer it may be unreachable for a moment).
   */
  private async whoseBatch(
    batchId: string,
    manifest: Manifest,
  ): Promise<'ours' | 'other' | 'none' | 'unknown'> {
    const handlesOf = (m: Manifest) =>
      [...m.entries, ...m.moves]
        .flatMap((e) => e.handles ?? [])
        .sort()
        .join('\n');
    for (let attempt = 0; attempt < 5; attempt++) {
      try {
        const head = await this.c.o.store.getHead(batchId);
        if (!head) return 'none';
        const stored = await this.c.o.store.getManifest(head);
        return stored && handlesOf(stored) === handlesOf(manifest) ? 'ours' : 'other';
      } catch {
        await new Promise((r) => setTimeout(r, 400 * 2 ** attempt));
      }
    }
    return 'unknown';
  }

  /**
   * Extends the visibility of a batch's messages to the slot's `invisibleUntil`. Returns the ids
   * whose copies could not all be extended (they may return early).
   */
  private async holdUntil(slot: Slot, owned: ManifestEntry[], now: number): Promise<Set<string>> {
    const lost = new Set<string>();
    const items = owned.flatMap((m) => {
      const seconds = Math.min(
        visibilityLeft(m.receivedAt ?? now, now),
        Math.ceil((slot.invisibleUntil - now) / 1000),
      );
      return (m.handles ?? []).map((handle) => ({ handle, seconds: Math.max(1, seconds), id: m.id }));
    });
    const failed = await this.c.changeVisibility(slot.sqsUrl, items);
    for (const i of items) if (failed.has(i.handle)) lost.add(i.id);
    return lost;
  }
}
