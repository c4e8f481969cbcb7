import { createHash, createHmac } from 'node:crypto';
import {
  ChangeMessageVisibilityBatchCommand,
  DeleteMessageBatchCommand,
  SendMessageBatchCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import { newToken } from '../engine/ids.ts';
import type { AttachmentStore } from '../forms/queue-consumer/attachments.ts';
import type { ConsumerSpec } from '../forms/queue-consumer/consumer-spec.ts';
import { crashPoint } from '../shared/fault-points.ts';
import { log } from '../shared/log.ts';
import type {
  AttemptsRecord,
  BatchHead,
  DeliveryStore,
  ManifestEntry,
  SettlementCode,
} from './delivery-store.ts';
import { type Envelope, encodeEnvelope } from './envelope.ts';
import { MESSAGE_LIMITS, NamedError } from './limits.ts';
import type { CommitStore, QueueDirectory, QueueTarget } from './ports.ts';
import type { InvocationOutcome, SettleCall } from './settlement-protocol.ts';

/** A slot taken for one batch: everything the runner needs, nothing secret besides the credential. */
export interface Slot {
  batchId: string;
  consumerUid: string;
  generation: number;
  queueUid: string;
  queueName: string;
  sqsUrl: string;
  maxBatchSize: number;
  maxBatchTimeoutSeconds: number;
  /** The batch must be finalised by then; after it, recovery retries what is unsettled. */
  deadline: number;
  /** Received messages stay invisible until then, so recovery always runs before they return. */
  invisibleUntil: number;
  workerUid: string;
  workerSpace: string;
  workerName: string;
  /** Where the worker's code runs (a Lambda function ARN on AWS, `local` here). */
  workerFunction: string;
}

export type AcquireResult = { status: 'acquired'; slot: Slot } | { status: 'busy' } | { status: 'stop' };

/** A message as the runner received it from SQS. */
export interface Received {
  receiptHandle: string;
  receivedAt: number;
  envelope: Omit<Envelope, 'body'>;
}

export interface Registration {
  /** The batch credential, handed only to the runner (never through the state machine). */
  credential: string;
  /** Indexes into the received list, in batch order, with their attempt numbers. */
  deliver: { received: number; attempts: number }[];
  /** Received messages that already had their last delivery: move them (bodies needed). */
  deadLetter: number[];
}

/** A message to move to the dead-letter queue: its body and where its original is. */
export interface DeadLetterItem {
  id: string;
  body: Uint8Array;
  receiptHandles: string[];
  hadRecord: boolean;
}

export interface DeliveryServiceOptions {
  store: DeliveryStore;
  sqs: SQSClient;
  directory: QueueDirectory;
  commits: CommitStore;
  attachments: AttachmentStore;
  getWorker(uid: string): Promise<{ space: string; name: string; deleted: boolean } | undefined>;
  /** Where a worker's code runs: a Lambda ARN on AWS, `local` for the local Host. */
  workerFunction(space: string, name: string): Promise<string | undefined>;
  /** Derives batch credentials (HMAC of the batch id), so none is stored or passed around. */
  credentialKey: Buffer;
  clock?: () => number;
  /** The longest a worker invocation may run. */
  workerTimeoutMs: number;
  /** How long a lane waits for a first message before giving its slot back. */
  idleWaitSeconds?: number;
  /** Time after a slot deadline within which recovery is guaranteed to have run. */
  graceMs?: number;
  /**
   * Added to a slot's deadline beyond idle wait + batch timeout + worker timeout: room for
   * registration, finalisation and clock skew (default 30 s). The fault-injection suite shortens it.
   */
  slotMarginMs?: number;
  /** Multi-message sends not committed after this long are discarded (their producer failed). */
  commitTimeoutMs?: number;
}

const hashCredential = (c: string) => createHash('sha256').update(c).digest('hex');
const chunks = <T>(items: T[], size: number): T[][] => {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
};

/**
 * The Host side of delivery: concurrency slots, batch registration with exact attempt counts,
 * first-wins settlement, finalisation and dead-lettering. The Step Functions tasks and the local
 * runner call these methods; the worker never touches the Host's tables.
 */
export class DeliveryService {
  private readonly o: Required<DeliveryServiceOptions>;

  constructor(opts: DeliveryServiceOptions) {
    this.o = {
      clock: Date.now,
      idleWaitSeconds: 20,
      graceMs: 60_000,
      slotMarginMs: 30_000,
      commitTimeoutMs: 15 * 60_000,
      ...opts,
    };
  }

  private now(): number {
    return this.o.clock();
  }

  /** The credential of a batch: unguessable without the Host's key (DL-09). */
  credentialOf(batchId: string): string {
    return createHmac('sha256', this.o.credentialKey).update(batchId).digest('base64url');
  }

  /** Whether `credential` is the one of `batchId`; compared by hash, so timing reveals nothing. */
  private ownsBatch(head: BatchHead, credential: string): boolean {
    return head.credentialHash === hashCredential(credential);
  }

  /** Finalisation requested by a runner: only with the batch's credential. */
  async finalizeAsRunner(
    batchId: string,
    credential: string,
    outcome: InvocationOutcome,
    receipts: { handles: string[]; receivedAt: number }[],
  ): Promise<{ deadLetter: number[] }> {
    const head = await this.o.store.getHead(batchId);
    if (!head || !this.ownsBatch(head, credential))
      throw new NamedError('unknown_batch', 'not a batch of this runner');
    return this.finalize(batchId, outcome, receipts);
  }

  private async consumer(consumerUid: string) {
    const a = await this.o.attachments.get(consumerUid);
    if (!a) return undefined;
    return a;
  }

  private async queueTarget(uid: string): Promise<QueueTarget | undefined> {
    return this.o.directory.queue(uid);
  }

  /** AcquireSlot: recover expired batches, then take a slot if fewer than maxConcurrency run. */
  async acquire(consumerUid: string, generation: number): Promise<AcquireResult> {
    const a = await this.consumer(consumerUid);
    if (a?.state !== 'active' || a.generation !== generation) return { status: 'stop' };
    await this.recoverExpired(consumerUid);
    const queue = await this.queueTarget(a.spec.queue.resourceUid);
    const worker = await this.o.getWorker(a.spec.worker.resourceUid);
    if (!queue || !worker || worker.deleted) return { status: 'stop' };
    const workerFunction = await this.o.workerFunction(worker.space, worker.name);
    if (!workerFunction) return { status: 'stop' };
    const now = this.now();
    const deadline =
      now +
      (this.o.idleWaitSeconds + a.spec.maxBatchTimeoutSeconds) * 1000 +
      this.o.workerTimeoutMs +
      this.o.slotMarginMs;
    const batchId = `b${newToken(18)}`;
    if (!(await this.o.store.acquireSlot(consumerUid, batchId, deadline, a.spec.maxConcurrency))) {
      return { status: 'busy' };
    }
    return {
      status: 'acquired',
      slot: {
        batchId,
        consumerUid,
        generation,
        queueUid: queue.queueUid,
        queueName: queue.queueName,
        sqsUrl: queue.sqsUrl,
        maxBatchSize: a.spec.maxBatchSize,
        maxBatchTimeoutSeconds: a.spec.maxBatchTimeoutSeconds,
        deadline,
        invisibleUntil: deadline + this.o.graceMs,
        workerUid: a.spec.worker.resourceUid,
        workerSpace: worker.space,
        workerName: worker.name,
        workerFunction,
      },
    };
  }

  /**
   * A lane's next slot in the same invocation. The credential of the batch it just ran proves
   * the caller is this consumer's runner (the batch head names the consumer).
   */
  async acquireNext(previous: Slot, credential: string): Promise<AcquireResult> {
    const head = await this.o.store.getHead(previous.batchId);
    if (!head || !this.ownsBatch(head, credential) || head.consumerUid !== previous.consumerUid) {
      throw new NamedError('unknown_batch', 'not a batch of this runner');
    }
    return this.acquire(previous.consumerUid, previous.generation);
  }

  /** Decides, for each received message, whether it is delivered now, later, or dead-lettered. */
  async register(claimed: Slot, received: Received[]): Promise<Registration> {
    // Only the slot's id is taken from the caller; everything else comes from the Host's own
    // records, so a forged or altered slot cannot register anything (DL-09).
    const deadline = (await this.o.store.slots(claimed.consumerUid))[claimed.batchId];
    const a = await this.consumer(claimed.consumerUid);
    const queue = a ? await this.queueTarget(a.spec.queue.resourceUid) : undefined;
    if (deadline === undefined || (await this.o.store.getHead(claimed.batchId))) {
      // A revoked slot (its consumer is stopping): give the messages back at once, deliver nothing.
      if (queue && queue.queueUid === claimed.queueUid) {
        await this.changeVisibility(
          queue.sqsUrl,
          received.map((r) => ({ handle: r.receiptHandle, seconds: 0 })),
        );
      }
      throw new NamedError('unknown_batch', 'no such slot is open');
    }
    const slot: Slot = {
      ...claimed,
      deadline,
      queueUid: queue?.queueUid ?? claimed.queueUid,
      sqsUrl: queue?.sqsUrl ?? '',
    };
    const now = this.now();
    const hide: { handle: string; seconds: number }[] = [];
    const remove: string[] = [];
    /** Acknowledged messages seen again: their records go once their copies are deleted. */
    const removeAcked: { id: string; handle: string }[] = [];
    if (a?.state !== 'active' || !queue || queue.queueUid !== claimed.queueUid) {
      // The stop boundary passed while this lane was receiving: nothing new starts.
      if (queue)
        await this.changeVisibility(
          queue.sqsUrl,
          received.map((r) => ({ handle: r.receiptHandle, seconds: 0 })),
        );
      await this.o.store.releaseSlot(slot.consumerUid, slot.batchId);
      return { credential: '', deliver: [], deadLetter: [] };
    }
    const credential = this.credentialOf(slot.batchId);
    const spec = a.spec;
    const commitIds = [...new Set(received.flatMap((r) => (r.envelope.commit ? [r.envelope.commit] : [])))];
    const committed = commitIds.length ? await this.o.commits.committed(commitIds) : new Set<string>();
    if (commitIds.some((c) => !committed.has(c))) {
      // A receive can overtake the producer's commit write by milliseconds: look once more.
      await new Promise((r) => setTimeout(r, 250));
      const missing = commitIds.filter((c) => !committed.has(c));
      for (const c of await this.o.commits.committed(missing)) committed.add(c);
    }
    const records =
      (await this.o.store.outstanding(slot.queueUid)) > 0
        ? await this.o.store.getAttempts(
            slot.queueUid,
            received.map((r) => r.envelope.id),
          )
        : new Map<string, AttemptsRecord>();

    const deliver: Registration['deliver'] = [];
    const deadLetter: number[] = [];
    const manifest: ManifestEntry[] = [];
    const seen = new Set<string>();
    for (const [i, r] of received.entries()) {
      const e = r.envelope;
      if (seen.has(e.id)) {
        hide.push({ handle: r.receiptHandle, seconds: 30 }); // an SQS duplicate of a message in this batch
        continue;
      }
      seen.add(e.id);
      if (e.commit && !committed.has(e.commit)) {
        if (now - e.ts > this.o.commitTimeoutMs) remove.push(r.receiptHandle);
        else hide.push({ handle: r.receiptHandle, seconds: 2 });
        continue;
      }
      const rec = records.get(e.id);
      if (rec?.acked) {
        remove.push(r.receiptHandle);
        removeAcked.push({ id: e.id, handle: r.receiptHandle });
        continue;
      }
      const notBefore = Math.max(e.notBefore ?? 0, rec?.notBefore ?? 0);
      if (notBefore > now) {
        hide.push({
          handle: r.receiptHandle,
          seconds: Math.min(MESSAGE_LIMITS.sqsMaxVisibilitySeconds, Math.ceil((notBefore - now) / 1000)),
        });
        continue;
      }
      const attempts = (rec?.attempts ?? 0) + 1;
      if (attempts > 1 + spec.maxRetries) {
        deadLetter.push(i);
        continue;
      }
      deliver.push({ received: i, attempts });
      manifest.push({ id: e.id, ts: e.ts, attempts, hadRecord: rec !== undefined });
    }
    await this.changeVisibility(slot.sqsUrl, hide);
    const notRemoved = await this.deleteMessages(slot.sqsUrl, remove);
    for (const d of removeAcked) {
      // A copy that could not be deleted comes back: its record must still say it is done.
      if (!notRemoved.has(d.handle)) await this.o.store.clearAttempts(slot.queueUid, d.id);
    }
    if (manifest.length === 0) {
      // Nothing to deliver: the slot is freed now, or by the dead-letter moves the runner makes.
      if (deadLetter.length === 0) await this.o.store.releaseSlot(slot.consumerUid, slot.batchId);
      return { credential, deliver, deadLetter };
    }
    const head: BatchHead = {
      batchId: slot.batchId,
      consumerUid: slot.consumerUid,
      queueUid: slot.queueUid,
      generation: slot.generation,
      credentialHash: hashCredential(credential),
      size: manifest.length,
      closed: false,
      outcome: undefined,
      applied: false,
      settled: {},
      all: undefined,
      deadline: slot.deadline,
      doubtful: false,
      pendingDeadLetter: [],
    };
    // The stop boundary (QC-08): a slot still unregistered when its consumer stops is revoked,
    // and then this batch never starts.
    if (!(await this.o.store.markRegistered(slot.consumerUid, slot.batchId))) {
      const back = deliver.flatMap((d) => {
        const r = received[d.received];
        return r ? [{ handle: r.receiptHandle, seconds: 0 }] : [];
      });
      await this.changeVisibility(queue.sqsUrl, back);
      return { credential, deliver: [], deadLetter };
    }
    await this.o.store.createBatch(head, manifest);
    crashPoint('delivery.after-register');
    return { credential, deliver, deadLetter };
  }

  /** One settlement call from a worker (DL-03, DL-04, DL-08, DL-09). */
  async settle(batchId: string, credential: string, call: SettleCall): Promise<void> {
    const hash = hashCredential(credential);
    let result: Awaited<ReturnType<DeliveryStore['settle']>>;
    try {
      result = await this.o.store.settle(batchId, hash, call);
    } catch (err) {
      if (err instanceof NamedError) throw err;
      log.warn('settlement could not be recorded', { batchId, err });
      await this.o.store.markDoubtful(batchId).catch(() => undefined);
      throw new NamedError(
        'backend_unavailable',
        'the settlement could not be recorded; it is not in effect',
      );
    }
    crashPoint('delivery.after-settle');
    if (result === 'unknown_batch')
      throw new NamedError('unknown_batch', 'this batch is not open for settlement');
    if (result === 'already_settled')
      throw new NamedError('already_settled', 'this message is already settled');
  }

  /**
   * Closes the batch and applies every decision. With receipt handles it deletes, re-hides or
   * returns messages at once; without (recovery after a crash) it writes attempts records that
   * take effect when the messages become visible again. Returns the indexes that must be moved
   * to the dead-letter queue with their bodies (only when handles are given).
   */
  async finalize(
    batchId: string,
    outcome: InvocationOutcome,
    receipts?: { handles: string[]; receivedAt: number }[],
  ): Promise<{ deadLetter: number[] }> {
    const head = await this.o.store.closeBatch(batchId, outcome);
    if (!head) return { deadLetter: [] };
    if (head.applied) {
      if (!receipts && head.pendingDeadLetter.length) await this.recordPendingDeadLetters(head);
      return { deadLetter: receipts ? head.pendingDeadLetter : [] };
    }
    const manifest = (await this.o.store.getManifest(batchId)) ?? [];
    const a = await this.consumer(head.consumerUid);
    const spec = a?.spec;
    const queue = await this.queueTarget(head.queueUid);
    const now = this.now();
    const effective = head.outcome === 'returned' && !head.doubtful ? 'returned' : 'retry-rest';
    const expires =
      Math.ceil(now / 1000) +
      (queue?.retentionSeconds ?? 1_209_600) +
      MESSAGE_LIMITS.maxDelaySeconds +
      86_400;
    const toDelete: { index: number; handle: string }[] = [];
    const toHide: { handle: string; seconds: number }[] = [];
    const deadLetter: number[] = [];

    for (const [i, m] of manifest.entries()) {
      const code: SettlementCode =
        head.settled[String(i)] ?? head.all ?? (effective === 'returned' ? 'a' : 'r');
      const r = receipts?.[i];
      if (code === 'a') {
        if (r && queue) for (const h of r.handles) toDelete.push({ index: i, handle: h });
        else
          await this.o.store.putAttempts(
            head.queueUid,
            { id: m.id, attempts: m.attempts, acked: true },
            expires,
          );
        continue;
      }
      const maxRetries = spec?.maxRetries ?? 0;
      if (m.attempts >= 1 + maxRetries) {
        // Out of retries: the next step is the dead-letter move, which needs the body.
        if (r && queue) deadLetter.push(i);
        else await this.o.store.putAttempts(head.queueUid, { id: m.id, attempts: m.attempts }, expires);
        continue;
      }
      const delay = code.length > 1 ? Number(code.slice(1)) : (spec?.retryDelaySeconds ?? 0);
      // The attempts record is durable before the message can be seen again (exact attempts).
      await this.o.store.putAttempts(
        head.queueUid,
        { id: m.id, attempts: m.attempts, notBefore: delay > 0 ? now + delay * 1000 : undefined },
        expires,
      );
      if (r && queue) {
        const elapsed = Math.floor((now - r.receivedAt) / 1000);
        const seconds = Math.max(0, Math.min(delay, MESSAGE_LIMITS.sqsMaxVisibilitySeconds - elapsed - 1));
        for (const h of r.handles) toHide.push({ handle: h, seconds });
      }
    }
    if (queue) {
      const failed = await this.deleteMessages(
        queue.sqsUrl,
        toDelete.map((d) => d.handle),
      );
      for (const d of toDelete) {
        const m = manifest[d.index] as ManifestEntry;
        if (failed.has(d.handle)) {
          await this.o.store.putAttempts(
            head.queueUid,
            { id: m.id, attempts: m.attempts, acked: true },
            expires,
          );
        } else if (m.hadRecord) {
          await this.o.store.clearAttempts(head.queueUid, m.id);
        }
      }
      crashPoint('delivery.mid-finalize');
      await this.changeVisibility(queue.sqsUrl, toHide);
    }
    await this.o.store.markApplied(batchId, deadLetter);
    if (deadLetter.length === 0) await this.o.store.releaseSlot(head.consumerUid, batchId);
    return { deadLetter };
  }

  /** The runner died before moving these: record them so the move happens when they return. */
  private async recordPendingDeadLetters(head: BatchHead): Promise<void> {
    const manifest = (await this.o.store.getManifest(head.batchId)) ?? [];
    const queue = await this.queueTarget(head.queueUid);
    const expires =
      Math.ceil(this.now() / 1000) +
      (queue?.retentionSeconds ?? 1_209_600) +
      MESSAGE_LIMITS.maxDelaySeconds +
      86_400;
    for (const i of head.pendingDeadLetter) {
      const m = manifest[i];
      if (m) await this.o.store.putAttempts(head.queueUid, { id: m.id, attempts: m.attempts }, expires);
    }
    await this.o.store.markApplied(head.batchId, []);
    await this.o.store.releaseSlot(head.consumerUid, head.batchId);
  }

  /**
   * Moves messages to the consumer's dead-letter queue as new messages (new id, new timestamp,
   * attempts 1), durably there before the originals are removed; drops them without one (DL-07).
   */
  async deadLetter(
    consumerUid: string,
    queueUid: string,
    items: DeadLetterItem[],
    batch?: { batchId: string; phase: 'registration' | 'finalize' },
  ): Promise<void> {
    const a = await this.consumer(consumerUid);
    const queue = await this.queueTarget(queueUid);
    const dlqUid = a?.spec.deadLetterQueue?.resourceUid;
    const dlq = dlqUid ? await this.queueTarget(dlqUid) : undefined;
    if (dlqUid && !dlq) throw new Error('the dead-letter queue is not available; the messages stay');
    if (dlq) {
      const now = this.now();
      for (const part of chunks(items, 10)) {
        const entries = part.map((item, n) => {
          const delay = dlq.defaultDelaySeconds;
          const env: Envelope = { id: `m${newToken(16)}`, ts: now, body: item.body };
          if (delay > MESSAGE_LIMITS.sqsMaxDelaySeconds) env.notBefore = now + delay * 1000;
          return {
            Id: String(n),
            MessageBody: encodeEnvelope(env),
            DelaySeconds: Math.min(delay, MESSAGE_LIMITS.sqsMaxDelaySeconds),
          };
        });
        const out = await this.o.sqs.send(
          new SendMessageBatchCommand({ QueueUrl: dlq.sqsUrl, Entries: entries }),
        );
        if (out.Failed?.length) throw new Error('the dead-letter queue refused messages; the originals stay');
      }
      crashPoint('delivery.after-dead-letter-send');
    }
    const failed = queue
      ? await this.deleteMessages(
          queue.sqsUrl,
          items.flatMap((i) => i.receiptHandles),
        )
      : new Set<string>();
    const expires =
      Math.ceil(this.now() / 1000) +
      (queue?.retentionSeconds ?? 1_209_600) +
      MESSAGE_LIMITS.maxDelaySeconds +
      86_400;
    for (const item of items) {
      if (item.receiptHandles.some((h) => failed.has(h))) {
        // The original could not be removed and will come back: its fate is final (moved or
        // dropped), so it is deleted on sight, never delivered again as a first attempt (DL-07).
        // The count no longer matters for a record marked done.
        await this.o.store.putAttempts(queueUid, { id: item.id, attempts: 0, acked: true }, expires);
      } else if (item.hadRecord) await this.o.store.clearAttempts(queueUid, item.id);
    }
    if (batch?.phase === 'finalize') {
      await this.o.store.markApplied(batch.batchId, []);
      await this.o.store.releaseSlot(consumerUid, batch.batchId);
    } else if (batch && !(await this.o.store.getHead(batch.batchId))) {
      // Moves found at registration, with nothing delivered: the slot holds no batch.
      await this.o.store.releaseSlot(consumerUid, batch.batchId);
    }
  }

  /** Finishes every batch of a consumer whose slot deadline passed: unsettled messages are retried. */
  async recoverExpired(consumerUid: string): Promise<number> {
    const now = this.now();
    let recovered = 0;
    for (const [batchId, deadline] of Object.entries(await this.o.store.slots(consumerUid))) {
      if (deadline > now) continue;
      await this.recoverBatch(consumerUid, batchId);
      recovered++;
    }
    return recovered;
  }

  /** Ends one batch whose invocation was lost: closes it as abandoned and records what is owed. */
  async recoverBatch(consumerUid: string, batchId: string): Promise<void> {
    const deadline = (await this.o.store.slots(consumerUid))[batchId];
    if (deadline !== undefined && deadline > this.now()) {
      // The invocation failed, but its handler may not have stopped (a lost Lambda response):
      // end settlement now, and keep the slot — and so the concurrency bound — until the
      // deadline, when recoverExpired applies what is owed.
      await this.o.store.closeBatch(batchId, 'abandoned');
      return;
    }
    const head = await this.o.store.getHead(batchId);
    if (head && (!head.applied || head.pendingDeadLetter.length > 0)) {
      // Unsettled messages are retried, never acknowledged; pending dead-letter moves are recorded.
      await this.finalize(batchId, 'abandoned');
      return;
    }
    await this.o.store.releaseSlot(consumerUid, batchId);
  }

  /** The running batches of a consumer and their deadlines (for operators and tests). */
  slotsOf(consumerUid: string): Promise<Record<string, number>> {
    return this.o.store.slots(consumerUid);
  }

  /** Batches that started and have not ended (QC-08): expired ones are recovered first. */
  async inFlightBatches(consumerUid: string): Promise<number> {
    await this.recoverExpired(consumerUid);
    await this.o.store.revokeUnregistered(consumerUid);
    return Object.keys(await this.o.store.slots(consumerUid)).length;
  }

  private async changeVisibility(url: string, items: { handle: string; seconds: number }[]): Promise<void> {
    for (const part of chunks(items, 10)) {
      await this.o.sqs
        .send(
          new ChangeMessageVisibilityBatchCommand({
            QueueUrl: url,
            Entries: part.map((p, n) => ({
              Id: String(n),
              ReceiptHandle: p.handle,
              VisibilityTimeout: p.seconds,
            })),
          }),
        )
        .catch((err) => log.warn('could not change message visibility; it returns on its own', { err }));
    }
  }

  /** Deletes by receipt handle; returns the handles that could not be deleted. */
  private async deleteMessages(url: string, handles: string[]): Promise<Set<string>> {
    const failed = new Set<string>();
    for (const part of chunks(handles, 10)) {
      try {
        const out = await this.o.sqs.send(
          new DeleteMessageBatchCommand({
            QueueUrl: url,
            Entries: part.map((h, n) => ({ Id: String(n), ReceiptHandle: h })),
          }),
        );
        for (const f of out.Failed ?? []) failed.add(part[Number(f.Id)] as string);
      } catch (err) {
        log.warn('could not delete messages', { err });
        for (const h of part) failed.add(h);
      }
    }
    return failed;
  }
}

export type { ConsumerSpec };
