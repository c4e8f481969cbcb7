/**
 * What an operator asks of queues and consumers (the `/ext/queues/v1` operator endpoints, the
 * `takoform` CLI): counts, consumer state, a look at messages, moving and purging them. Reads
 * go to SQS and the Host's table only; nothing here runs or settles a batch.
 */

import type { DeadLetterRecord } from '../adapters/aws/dynamodb-dead-letter-records.ts';
import type { ReceivedCopy, SqsMessageReader } from '../adapters/aws/sqs-message-reader.ts';
import type { QueueStats } from '../adapters/aws/sqs-queue-backend.ts';
import { decodeEnvelope, type Envelope } from '../delivery/envelope.ts';
import type { QueueTarget } from '../delivery/ports.ts';
import type { Attachment } from '../forms/queue-consumer/attachments.ts';
import type { ConsumerSpec } from '../forms/queue-consumer/consumer-spec.ts';
import { RECENT_BATCHES_SHOWN, type RecentBatch } from './recent-batches.ts';

/** Bounds of one operator call (the HTTP layer validates against them). */
export const OPERATOR_LIMITS = {
  maxPeek: 50,
  defaultPeek: 10,
  maxRedrive: 100,
  defaultRedrive: 100,
} as const;

/** How long a peek hides what it read: released at once after, back on its own if the call dies. */
const PEEK_HIDE_SECONDS = 10;
/** How long a redrive holds a message between copying and deleting it. */
const MOVE_HIDE_SECONDS = 60;
/** Bytes of a body shown in a peek. */
const PREVIEW_BYTES = 120;
/** Messages one call looks at to find chosen ones (by id) or ones matching a peek's filter. */
export const MAX_SCAN = 1000;

export interface QueueOperatorDeps {
  stats(queueUid: string): Promise<QueueStats | undefined>;
  /** Age of the oldest message in seconds, where the platform reports it (undefined: unknown). */
  oldestAgeSeconds?(target: QueueTarget): Promise<number | undefined>;
  reader: Pick<SqsMessageReader, 'receive' | 'release' | 'delete' | 'purge'>;
  /** The producer rules (`QueueProducer.sendBatch`): new ids, commit records, a wake. */
  sendBatch(target: QueueTarget, messages: { body: Uint8Array }[]): Promise<string[]>;
  committed(commitIds: readonly string[]): Promise<Set<string>>;
  deadLetterRecords(queueUid: string, messageIds: readonly string[]): Promise<Map<string, DeadLetterRecord>>;
  /** The consumer holding the queue's claim (uncached), whatever its attachment's state. */
  consumerOf(queueUid: string): Promise<string | undefined>;
  attachment(consumerUid: string): Promise<Attachment | undefined>;
  /** The consumer's slot map: held slots and which hold a registered (running) batch. */
  dispatchState(
    consumerUid: string,
  ): Promise<{ slots: Record<string, number>; registered: Record<string, boolean> }>;
  /** Finished batches, newest first. */
  recentBatches?(consumerUid: string, limit: number): Promise<RecentBatch[]>;
}

export interface QueueStatsView {
  queueUid: string;
  name: string;
  space: string;
  visible: number;
  inFlight: number;
  delayed: number;
  oldestAgeSeconds: number | null;
  consumerUid: string | null;
}

export interface PeekedMessage {
  /** The Host's message id; null for a body this Host did not write. */
  id: string | null;
  timestampMillis: number | null;
  sizeBytes: number;
  /** The first bytes as UTF-8 (invalid sequences shown as U+FFFD). */
  preview: string;
  /** false for a multi-message send whose commit is not (yet) recorded: it is not delivered. */
  committed: boolean;
  receiveCount: number | null;
  deadLetter: DeadLetterRecord | null;
}

export interface ConsumerStateView {
  consumerUid: string;
  /** `active`: batches start; `stopping`: being deleted, none start; `detached`: no attachment. */
  state: 'active' | 'stopping' | 'detached';
  generation: number | null;
  settings: Omit<ConsumerSpec, 'queue' | 'worker' | 'deadLetterQueue'> | null;
  /** Slots held (lanes gathering or running) and batches whose handler runs, against maxConcurrency. */
  slotsHeld: number;
  runningBatches: number;
  maxConcurrency: number | null;
  /** Each held slot: its batch id, its deadline (epoch ms) and whether its handler runs. */
  batches: { batchId: string; deadline: number; running: boolean }[];
  /** The last finished batches (at most 20, kept a day), newest first. */
  recentBatches: RecentBatch[];
  /** The newest handler error among them, with its batch and time; null when none threw. */
  lastHandlerError: { name: string; message: string; batchId: string; at: number } | null;
}

/** A request the operator layer refuses; the HTTP layer maps `reason` to a Problem code. */
export class OperatorRefusal extends Error {
  override name = 'OperatorRefusal';
  readonly reason: 'live_consumer' | 'same_queue';
  constructor(reason: OperatorRefusal['reason'], message: string) {
    super(message);
    this.reason = reason;
  }
}

interface Read {
  copy: ReceivedCopy;
  envelope: Envelope | undefined;
}

/** Which dead letters a peek shows: moved from this queue (uid or name), last ending so. */
export interface PeekFilter {
  sourceQueue?: string;
  /** `threw` also matches `threw/retry`. */
  lastOutcome?: string;
}

function matches(m: PeekedMessage, f: PeekFilter): boolean {
  const d = m.deadLetter;
  if (
    f.sourceQueue !== undefined &&
    d?.sourceQueueUid !== f.sourceQueue &&
    d?.sourceQueueName !== f.sourceQueue
  )
    return false;
  if (
    f.lastOutcome !== undefined &&
    d?.lastOutcome !== f.lastOutcome &&
    !d?.lastOutcome.startsWith(`${f.lastOutcome}/`)
  )
    return false;
  return true;
}

const handles = (reads: readonly Read[]) => reads.map((r) => r.copy.handle);

function preview(body: Uint8Array): string {
  return new TextDecoder('utf-8', { fatal: false }).decode(body.subarray(0, PREVIEW_BYTES));
}

function lastError(batches: readonly RecentBatch[]): ConsumerStateView['lastHandlerError'] {
  const b = batches.find((x) => x.error);
  return b?.error ? { ...b.error, batchId: b.batchId, at: b.endedAt } : null;
}

export class QueueOperator {
  private readonly d: QueueOperatorDeps;

  constructor(deps: QueueOperatorDeps) {
    this.d = deps;
  }

  async stats(q: QueueTarget): Promise<QueueStatsView | undefined> {
    const [counts, age, consumerUid] = await Promise.all([
      this.d.stats(q.queueUid),
      this.d.oldestAgeSeconds?.(q),
      this.d.consumerOf(q.queueUid),
    ]);
    if (!counts) return undefined;
    return {
      queueUid: q.queueUid,
      name: q.queueName,
      space: q.space,
      ...counts,
      oldestAgeSeconds: age ?? null,
      consumerUid: consumerUid ?? null,
    };
  }

  async consumerState(consumerUid: string): Promise<ConsumerStateView> {
    const [a, dispatch, recentBatches] = await Promise.all([
      this.d.attachment(consumerUid),
      this.d.dispatchState(consumerUid),
      this.d.recentBatches?.(consumerUid, RECENT_BATCHES_SHOWN) ?? [],
    ]);
    const slots = Object.keys(dispatch.slots);
    const settings = a
      ? {
          maxBatchSize: a.spec.maxBatchSize,
          maxBatchTimeoutSeconds: a.spec.maxBatchTimeoutSeconds,
          maxConcurrency: a.spec.maxConcurrency,
          maxRetries: a.spec.maxRetries,
          retryDelaySeconds: a.spec.retryDelaySeconds,
        }
      : null;
    return {
      consumerUid,
      state: a?.state ?? 'detached',
      generation: a?.generation ?? null,
      settings,
      slotsHeld: slots.length,
      runningBatches: slots.filter((b) => dispatch.registered[b] === true).length,
      maxConcurrency: a?.spec.maxConcurrency ?? null,
      batches: slots
        .map((b) => ({
          batchId: b,
          deadline: dispatch.slots[b] ?? 0,
          running: dispatch.registered[b] === true,
        }))
        .sort((x, y) => x.deadline - y.deadline),
      recentBatches,
      lastHandlerError: lastError(recentBatches),
    };
  }

  /**
   * Reads up to `limit` messages without consuming them: each is received (hidden for a few
   * seconds), then made visible again. SQS counts this as a receive (its ApproximateReceiveCount
   * grows), but the Host counts deliveries in its own records, so a peek never costs a message a
   * retry. While a consumer runs on the queue, a peeked message may reach a handler a moment later.
   */
  async peek(q: QueueTarget, limit: number, filter: PeekFilter = {}): Promise<PeekedMessage[]> {
    const filtered = filter.sourceQueue !== undefined || filter.lastOutcome !== undefined;
    if (!filtered) return this.look(q, limit);
    // A filter looks further (a few seconds more hidden, each read given back after).
    const seen = await this.look(q, OPERATOR_LIMITS.maxPeek);
    return seen.filter((m) => matches(m, filter)).slice(0, limit);
  }

  private async look(q: QueueTarget, limit: number): Promise<PeekedMessage[]> {
    const reads = await this.gather(q, limit, PEEK_HIDE_SECONDS);
    try {
      const ids = reads.flatMap((r) => (r.envelope ? [r.envelope.id] : []));
      const [records, committed] = await Promise.all([
        ids.length > 0 ? this.d.deadLetterRecords(q.queueUid, ids) : new Map<string, DeadLetterRecord>(),
        this.committedOf(reads),
      ]);
      return reads.map(({ copy, envelope: e }) => {
        const raw = e?.body ?? new TextEncoder().encode(copy.body);
        return {
          id: e?.id ?? null,
          timestampMillis: e?.ts ?? copy.sentAt ?? null,
          sizeBytes: raw.byteLength,
          preview: preview(raw),
          committed: !e?.commit || committed.has(e.commit),
          receiveCount: copy.receiveCount ?? null,
          deadLetter: (e && records.get(e.id)) ?? null,
        };
      });
    } finally {
      await this.d.reader.release(
        q.sqsUrl,
        reads.map((r) => r.copy.handle),
      );
    }
  }

  /**
   * Moves up to `limit` messages from `from` to `to` as new messages (new ids, attempts 1): each
   * chunk is sent to `to` first and deleted from `from` only after the send was accepted, so a
   * failure in between leaves a duplicate, never a loss. Refused while `from` has a consumer,
   * whose batches would race the move. Bodies this Host did not write, and multi-message sends
   * never committed, stay where they are.
   */
  async redrive(
    from: QueueTarget,
    to: QueueTarget,
    limit: number,
  ): Promise<{ moved: number; skipped: number; messageIds: string[] }> {
    await this.mayMove(from, to);
    const messageIds: string[] = [];
    const held: string[] = [];
    try {
      while (messageIds.length < limit) {
        const reads = await this.receiveSome(from, limit - messageIds.length, MOVE_HIDE_SECONDS);
        if (reads.length === 0) break;
        const moved = await this.move(from, to, reads);
        messageIds.push(...moved.ids);
        // Left hidden until the end, so the next receive gets other messages.
        held.push(...handles(moved.unmovable));
      }
    } finally {
      if (held.length > 0) await this.d.reader.release(from.sqsUrl, held);
    }
    return { moved: messageIds.length, skipped: held.length, messageIds };
  }

  /**
   * Moves the messages of these ids (from a peek) as `redrive` does, leaving every other message
   * where it is: the poison message stays, its batch-mates go back to work. Looks at up to
   * MAX_SCAN messages; ids not among them are reported, not an error.
   */
  async redriveChosen(
    from: QueueTarget,
    to: QueueTarget,
    ids: readonly string[],
  ): Promise<{ moved: number; skipped: number; messageIds: string[]; notFound: string[] }> {
    await this.mayMove(from, to);
    const { found, others, notFound } = await this.find(from, ids);
    let unmovable: Read[] = found;
    try {
      const moved = await this.move(from, to, found);
      unmovable = moved.unmovable;
      return { moved: moved.ids.length, skipped: unmovable.length, messageIds: moved.ids, notFound };
    } finally {
      await this.d.reader.release(from.sqsUrl, handles([...others, ...unmovable]));
    }
  }

  /** Deletes every message of the queue, also those a running batch holds. */
  async purge(q: QueueTarget): Promise<void> {
    await this.d.reader.purge(q.sqsUrl);
  }

  /**
   * Deletes the messages of these ids (every copy of each) and nothing else; not a PurgeQueue,
   * so not limited to one a minute. Looks at up to MAX_SCAN messages.
   */
  async purgeChosen(
    q: QueueTarget,
    ids: readonly string[],
  ): Promise<{ deleted: string[]; notFound: string[] }> {
    const { found, others, notFound } = await this.find(q, ids);
    try {
      const failed = await this.d.reader.delete(q.sqsUrl, handles(found));
      if (failed > 0) await this.d.reader.delete(q.sqsUrl, handles(found));
    } finally {
      await this.d.reader.release(q.sqsUrl, handles(others));
    }
    return { deleted: [...new Set(found.map((r) => (r.envelope as Envelope).id))], notFound };
  }

  private async mayMove(from: QueueTarget, to: QueueTarget): Promise<void> {
    if (from.queueUid === to.queueUid) {
      throw new OperatorRefusal('same_queue', 'a queue cannot be redriven into itself');
    }
    if (await this.d.consumerOf(from.queueUid)) {
      throw new OperatorRefusal(
        'live_consumer',
        `queue ${from.queueName} has a consumer; delete it before redriving its messages`,
      );
    }
  }

  /**
   * Sends one copy per message id of `reads` to `to`, then deletes every read of those ids from
   * `from`; bodies this Host did not write, and multi-message sends never committed, are unmovable
   * and left held for the caller to give back.
   */
  private async move(from: QueueTarget, to: QueueTarget, reads: readonly Read[]) {
    const committed = await this.committedOf(reads);
    const movable = reads.filter(
      (r) => r.envelope && (!r.envelope.commit || committed.has(r.envelope.commit)),
    );
    const unmovable = reads.filter((r) => !movable.includes(r));
    if (movable.length === 0) return { ids: [] as string[], unmovable };
    const first = [...new Map(movable.map((r) => [(r.envelope as Envelope).id, r])).values()];
    const ids = await this.d.sendBatch(
      to,
      first.map((r) => ({ body: (r.envelope as Envelope).body })),
    );
    // A copy exists now; an original that is not deleted returns later as a duplicate.
    if ((await this.d.reader.delete(from.sqsUrl, handles(movable))) > 0)
      await this.d.reader.delete(from.sqsUrl, handles(movable));
    return { ids, unmovable };
  }

  /**
   * Receives until every one of `ids` is held, a receive comes back empty or MAX_SCAN messages
   * were looked at. `found` holds every copy of a chosen id; the caller gives `others` back.
   */
  private async find(q: QueueTarget, ids: readonly string[]) {
    const chosen = new Set(ids);
    const missing = new Set(ids);
    const found: Read[] = [];
    const others: Read[] = [];
    try {
      for (let seen = 0; missing.size > 0 && seen < MAX_SCAN; ) {
        const got = await this.receiveSome(q, 10, MOVE_HIDE_SECONDS);
        if (got.length === 0) break;
        seen += got.length;
        for (const r of got) {
          const id = r.envelope?.id;
          if (id !== undefined && chosen.has(id)) {
            found.push(r);
            missing.delete(id);
          } else others.push(r);
        }
      }
    } catch (err) {
      await this.d.reader.release(q.sqsUrl, handles([...found, ...others]));
      throw err;
    }
    return { found, others, notFound: [...missing] };
  }

  /** Receives until `limit` messages are held or a receive comes back empty. */
  private async gather(q: QueueTarget, limit: number, hideSeconds: number): Promise<Read[]> {
    const out: Read[] = [];
    try {
      while (out.length < limit) {
        const got = await this.receiveSome(q, limit - out.length, hideSeconds);
        if (got.length === 0) break;
        out.push(...got);
      }
    } catch (err) {
      await this.d.reader.release(
        q.sqsUrl,
        out.map((r) => r.copy.handle),
      );
      throw err;
    }
    return out;
  }

  private async receiveSome(q: QueueTarget, max: number, hideSeconds: number): Promise<Read[]> {
    const copies = await this.d.reader.receive(q.sqsUrl, max, hideSeconds);
    return copies.map((copy) => ({ copy, envelope: decodeEnvelope(copy.body) }));
  }

  private async committedOf(reads: readonly Read[]): Promise<Set<string>> {
    const ids = reads.flatMap((r) => (r.envelope?.commit ? [r.envelope.commit] : []));
    return ids.length > 0 ? this.d.committed(ids) : new Set();
  }
}
