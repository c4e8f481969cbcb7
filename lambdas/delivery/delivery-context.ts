/**
 * What the parts of delivery share (`delivery-service.ts` composes them): the options with their
 * defaults, the clock, the batch credentials and seals, the consumer and queue reads, and the
 * queue requests that return, hide or delete messages.
 */
import { createHash, createHmac } from 'node:crypto';
import type { AttachmentStore } from '../forms/queue-consumer/attachments.ts';
import type { RecoverOptions } from './batch-recovery.ts';
import { DEFER_AFTER_MS } from './deferrals.ts';
import type { BatchHead, DeliveryStore } from './delivery-store.ts';
import { MESSAGE_LIMITS, NamedError } from './limits.ts';
import type { CommitStore, MessageQueue, QueueDirectory, QueueTarget } from './ports.ts';
import { changeVisibility, deleteMessages, type RequestsOutcome, type Visibility } from './queue-requests.ts';
import { slotSealValid } from './slot-seal.ts';
import type { Slot } from './slots.ts';

export interface DeliveryServiceOptions {
  store: DeliveryStore;
  messages: MessageQueue;
  directory: QueueDirectory;
  commits: CommitStore;
  attachments: AttachmentStore;
  getWorker(uid: string): Promise<{ space: string; name: string; deleted: boolean } | undefined>;
  /** Where a worker's code runs: a Lambda ARN on AWS, `local` for the local Host. */
  workerFunction(space: string, name: string): Promise<string | undefined>;
  /** Derives batch credentials (HMAC of the batch id), so none is stored or passed around. */
  credentialKey: Buffer;
  clock?: () => number;
  /** The longest a worker invocation may run (the Host's bound). */
  workerTimeoutMs: number;
  /**
   * The worker's own invocation bound where it has one (a Lambda function's timeout, from its
   * registration); a slot's deadline uses the smaller of the two, so a crashed worker's slot is
   * held no longer than its invocation could have lasted.
   */
  workerTimeoutMsOf?(space: string, name: string): Promise<number | undefined>;
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
  /**
   * A message received this long or more before it is due is sent again as a delayed copy
   * rather than hidden (`deferrals.ts`; default 60 s). Tests shorten it.
   */
  deferAfterMs?: number;
  /**
   * Told when the Host hid messages of a consumer's queue until a later time (a retry delay, a
   * wait for a commit, a postponed move, a `notBefore`) and when it moved messages to a queue:
   * the control loop starts lanes then, rather than at the supervisor's next minute. Must not throw.
   */
  delivery?: DeliveryEvents;
}

/** What the delivery service tells the control loop. */
export interface DeliveryEvents {
  /** Messages of this consumer's queue become visible again after these many seconds. */
  hidden(consumerUid: string, generation: number, seconds: number[]): Promise<void>;
  /** Messages were sent to this queue (a dead-letter move). */
  sent(queueUid: string): Promise<void>;
  /** A finished batch acknowledged (deleted) this many messages of the queue (the console's chart). */
  acknowledged?(queueUid: string, count: number): void;
}

/** The options with every default filled in. */
export type DeliveryConfig = Required<DeliveryServiceOptions>;

export const hashCredential = (c: string) => createHash('sha256').update(c).digest('hex');

/**
 * The longest visibility SQS still accepts for a message received at `receivedAt`: 12 hours from
 * its receive, less what has passed (rounded up) and a second for the receive's own round trip,
 * which SQS counts from before the runner saw the answer.
 */
export const visibilityLeft = (receivedAt: number, now: number) =>
  Math.max(1, MESSAGE_LIMITS.sqsMaxVisibilitySeconds - Math.ceil((now - receivedAt) / 1000) - 1);

/**
 * Receipt handles are used only until this long before the batch's messages may become visible
 * again (or half the grace, if shorter): after that a handle may be stale, and decisions are
 * written as attempts records instead.
 */
const HANDLE_SAFETY_MS = 5_000;
/** How far ahead of this function's clock another function's may run before its reads are doubted. */
export const SKEW_ALLOWANCE_MS = 5_000;

type RecoverBatch = (
  consumerUid: string,
  batchId: string,
  opts?: RecoverOptions,
) => Promise<{ heldUntil?: number }>;

export class DeliveryContext {
  readonly o: DeliveryConfig;

  /** Recovery of one batch (`batch-recovery.ts`), bound once every part exists. */
  private readonly recover: RecoverBatch;

  constructor(opts: DeliveryServiceOptions, recover: RecoverBatch) {
    this.recover = recover;
    this.o = {
      clock: Date.now,
      idleWaitSeconds: 20,
      graceMs: 60_000,
      slotMarginMs: 30_000,
      commitTimeoutMs: 15 * 60_000,
      deferAfterMs: DEFER_AFTER_MS,
      workerTimeoutMsOf: async () => undefined,
      delivery: { hidden: async () => {}, sent: async () => {} },
      ...opts,
    };
  }

  now(): number {
    return this.o.clock();
  }

  recoverBatch(consumerUid: string, batchId: string, opts?: RecoverOptions): Promise<{ heldUntil?: number }> {
    return this.recover(consumerUid, batchId, opts);
  }

  /** The credential of a batch: unguessable without the Host's key (DL-09). */
  credentialOf(batchId: string): string {
    return createHmac('sha256', this.o.credentialKey).update(batchId).digest('base64url');
  }

  /** Whether `credential` is the one of `batchId`; compared by hash, so timing reveals nothing. */
  ownsBatch(head: BatchHead, credential: string): boolean {
    return head.credentialHash === hashCredential(credential);
  }

  /** The head of a batch the caller proves to hold (its credential); `unknown_batch` otherwise. */
  async ownedHead(batchId: string, credential: string): Promise<BatchHead> {
    const head = await this.o.store.getHead(batchId);
    if (!head || !this.ownsBatch(head, credential))
      throw new NamedError('unknown_batch', 'not a batch of this runner');
    return head;
  }

  /** The sealed slot's fields, or `unknown_batch` if the Host did not seal it as it is. */
  trusted(slot: Slot): Slot {
    if (!slotSealValid(this.o.credentialKey, slot)) {
      throw new NamedError('unknown_batch', 'not a slot of this Host');
    }
    return slot;
  }

  /** Whether the manifest's receipt handles are still certain to be the current ones. */
  handlesValid(head: BatchHead, now: number): boolean {
    return now < head.invisibleUntil - Math.min(HANDLE_SAFETY_MS, this.o.graceMs / 2);
  }

  consumer(consumerUid: string) {
    return this.o.attachments.get(consumerUid);
  }

  queueTarget(uid: string): Promise<QueueTarget | undefined> {
    return this.o.directory.queue(uid);
  }

  /** Changes visibility; returns the handles whose change SQS did not confirm. */
  async changeVisibility(url: string, items: Visibility[]): Promise<Set<string>> {
    return (await changeVisibility(this.o.messages, url, items)).failed;
  }

  /**
   * Returns messages to the queue (or hides them for a retry delay) where leaving them hidden
   * would stall them: until the batch's hold ends, which at the default worker timeout is more
   * than 15 minutes. When SQS did not take a change (an outage, not a refused handle), this
   * throws before the batch is marked applied, so the runner reports the batch unfinished and
   * recovery applies it again, at once and until SQS takes it.
   */
  async releaseVisibility(url: string, items: Visibility[], what: string): Promise<void> {
    const { unsent } = await changeVisibility(this.o.messages, url, items);
    if (unsent > 0)
      throw new Error(`SQS did not take ${unsent} visibility changes (${what}); applied again later`);
  }

  /** Deletes by receipt handle (retrying entries SQS failed); returns the handles not deleted. */
  async deleteMessages(url: string, handles: string[]): Promise<Set<string>> {
    return (await deleteMessages(this.o.messages, url, handles)).failed;
  }

  /** `deleteMessages`, also counting the deletes SQS did not take (an outage, not a refused handle). */
  deletions(url: string, handles: string[]): Promise<RequestsOutcome> {
    return deleteMessages(this.o.messages, url, handles);
  }
}
