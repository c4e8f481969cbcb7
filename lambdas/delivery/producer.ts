import { newResourceUid, newToken } from '../engine/ids.ts';
import { log } from '../shared/log.ts';
import { encodeEnvelope } from './envelope.ts';
import { MESSAGE_LIMITS, NamedError, recordExpiry } from './limits.ts';
import { type CommitStore, type MessageQueue, type QueueTarget, SEND_OUTCOME_UNKNOWN } from './ports.ts';
import { bySendLimits } from './sqs-batches.ts';

/**
 * The producer rules of AtLeastOnceQueue 0.2.0 (AQ-04), shared by every path that sends:
 * Worker bindings, the HTTP extension and the TypeScript producer client (host-profile §3).
 *
 * Argument shapes the Forms name no error for (a non-array or empty batch, a non-object item,
 * unknown fields in an item or in `options`, a `delaySeconds` that is not an integer 0..43200)
 * reject with a `TypeError`, as settlement calls do for bad arguments (host-profile §4). The
 * four Form names are used exactly where the Form says: `invalid_body`, `message_too_large`,
 * `batch_too_large`, `backend_unavailable`. Bodies are never logged.
 */

export interface QueueProducerOptions {
  messages: Pick<MessageQueue, 'send' | 'sendBatch'>;
  commits: CommitStore;
  /** Epoch milliseconds; the acceptance time of each message (default `Date.now`). */
  clock?: () => number;
  /** Host message ids: 1..256 characters, unique (default `m` + a sortable random id). */
  newMessageId?: (now: number) => string;
  /** Commit ids for multi-message sends: unguessable (default 192 random bits). */
  newCommitId?: () => string;
  /**
   * Told after SQS accepted a send: whether a message is due now, and the SQS delays (s) of the
   * others (the control loop wakes the queue's consumer, now and when they become visible). It must
   * not throw; the send has succeeded whatever it does. A producer without it marks its messages
   * `unannounced`, so lanes watch for them instead.
   */
  onSent?: (target: QueueTarget, due: SentDue) => Promise<void>;
}

/** When the messages of one accepted send become visible. */
export interface SentDue {
  now: boolean;
  /** The distinct SQS delays (s) of the delayed ones, ascending. */
  later: number[];
}

function dueOf(outgoing: readonly { delaySeconds: number }[]): SentDue {
  const later = [...new Set(outgoing.map((o) => o.delaySeconds).filter((d) => d > 0))].sort((a, b) => a - b);
  return { now: outgoing.some((o) => o.delaySeconds === 0), later };
}

export interface PreparedMessage {
  body: Uint8Array;
  delaySeconds: number | undefined;
}

/** Chunks of one sendBatch in flight at once. */
const PARALLEL_CHUNKS = 8;
/** Tries per chunk for entries SQS reports as failed, and for the commit write. */
const MAX_TRIES = 4;
const RETRY_BASE_MS = 25;

/**
 * No commit is written later than this after acceptance: the dispatcher discards uncommitted
 * messages some time after their `timestampMillis` (15 min), and a commit that came after some
 * were discarded would confirm a send that was not whole. Well inside that bound.
 */
export const COMMIT_DEADLINE_MS = 5 * 60_000;

const ITEM_FIELDS = new Set<PropertyKey>(['body', 'delaySeconds']);
const OPTION_FIELDS = new Set<PropertyKey>(['delaySeconds']);

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** `m` + the Host's sortable id (10 characters of time, 16 of randomness): 27 characters. */
export const newMessageId = (now: number = Date.now()) => `m${newResourceUid(now).slice(1)}`;

function isArrayBuffer(v: unknown): v is ArrayBuffer {
  // Tag check rather than instanceof: bodies may come from another realm (a worker's vm context).
  return Object.prototype.toString.call(v) === '[object ArrayBuffer]';
}

/**
 * A copy of the body's bytes, taken now so later changes by the caller cannot alter what is
 * sent. `invalid_body` for anything that is not an ArrayBuffer, an ArrayBufferView or a string;
 * `message_too_large` past 127000 bytes (strings count their UTF-8 bytes).
 */
export function bodyBytes(body: unknown): Uint8Array {
  let bytes: Uint8Array;
  if (typeof body === 'string') {
    if (body.length > MESSAGE_LIMITS.maxBodyBytes) throw tooLarge();
    bytes = new Uint8Array(Buffer.from(body, 'utf8'));
  } else if (ArrayBuffer.isView(body)) {
    if (body.byteLength > MESSAGE_LIMITS.maxBodyBytes) throw tooLarge();
    bytes = new Uint8Array(body.byteLength);
    bytes.set(new Uint8Array(body.buffer, body.byteOffset, body.byteLength));
  } else if (isArrayBuffer(body)) {
    if (body.byteLength > MESSAGE_LIMITS.maxBodyBytes) throw tooLarge();
    bytes = new Uint8Array(body.slice(0));
  } else {
    throw new NamedError('invalid_body', 'a message body is an ArrayBuffer, an ArrayBufferView or a string');
  }
  if (bytes.byteLength > MESSAGE_LIMITS.maxBodyBytes) throw tooLarge();
  return bytes;
}

function tooLarge(): NamedError {
  return new NamedError(
    'message_too_large',
    `a message body is at most ${MESSAGE_LIMITS.maxBodyBytes} bytes`,
  );
}

function isObject(v: unknown): v is Record<PropertyKey, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function closedKeys(v: Record<PropertyKey, unknown>, allowed: ReadonlySet<PropertyKey>, what: string): void {
  for (const key of Reflect.ownKeys(v)) {
    if (!allowed.has(key)) throw new TypeError(`${what} has an unknown field ${String(key).slice(0, 64)}`);
  }
}

/** `delaySeconds` as given: undefined when absent (the queue's default applies). */
function delayOf(v: Record<PropertyKey, unknown>, what: string): number | undefined {
  if (!Object.hasOwn(v, 'delaySeconds')) return undefined;
  const d = v.delaySeconds;
  if (d === undefined) return undefined;
  if (typeof d !== 'number' || !Number.isInteger(d) || d < 0 || d > MESSAGE_LIMITS.maxDelaySeconds) {
    throw new TypeError(`${what}.delaySeconds must be an integer in 0..${MESSAGE_LIMITS.maxDelaySeconds}`);
  }
  return d === 0 ? 0 : d; // -0 is 0
}

/** Validates `send(body, options?)` arguments. */
export function prepareSend(body: unknown, options?: unknown): PreparedMessage {
  let delaySeconds: number | undefined;
  if (options !== undefined) {
    if (!isObject(options)) throw new TypeError('options must be an object');
    closedKeys(options, OPTION_FIELDS, 'options');
    delaySeconds = delayOf(options, 'options');
  }
  return { body: bodyBytes(body), delaySeconds };
}

/** Validates `sendBatch(messages)` arguments: 1..100 closed `{body, delaySeconds?}` items. */
export function prepareBatch(messages: unknown): PreparedMessage[] {
  if (!Array.isArray(messages)) throw new TypeError('sendBatch takes an array of messages');
  if (messages.length === 0) throw new TypeError('sendBatch takes at least one message');
  if (messages.length > MESSAGE_LIMITS.maxBatchMessages) {
    throw new NamedError(
      'batch_too_large',
      `a batch holds at most ${MESSAGE_LIMITS.maxBatchMessages} messages`,
    );
  }
  const out: PreparedMessage[] = [];
  for (let i = 0; i < messages.length; i++) {
    const item: unknown = messages[i];
    const what = `messages[${i}]`;
    if (!isObject(item)) throw new TypeError(`${what} must be an object {body, delaySeconds?}`);
    closedKeys(item, ITEM_FIELDS, what);
    const delaySeconds = delayOf(item, what);
    out.push({ body: bodyBytes(item.body), delaySeconds });
  }
  return out;
}

interface Outgoing {
  entryId: string;
  messageId: string;
  body: string;
  delaySeconds: number;
}

export class QueueProducer {
  private readonly messages: QueueProducerOptions['messages'];
  private readonly commits: CommitStore;
  private readonly clock: () => number;
  private readonly newMessageId: (now: number) => string;
  private readonly newCommitId: () => string;
  private readonly onSent: ((target: QueueTarget, due: SentDue) => Promise<void>) | undefined;

  constructor(opts: QueueProducerOptions) {
    this.onSent = opts.onSent;
    this.messages = opts.messages;
    this.commits = opts.commits;
    this.clock = opts.clock ?? Date.now;
    this.newMessageId = opts.newMessageId ?? newMessageId;
    this.newCommitId = opts.newCommitId ?? (() => `c${newToken(24)}`);
  }

  /** One message; resolves to its Host message id once SQS accepted it. */
  async send(target: QueueTarget, body: unknown, options?: unknown): Promise<string> {
    return this.sendOne(target, prepareSend(body, options));
  }

  /**
   * One message, with no commit record: its copies cannot be told apart, so the port's `send`
   * never sends it twice (an answer lost after SQS took it is `backend_unavailable`, and the
   * producer, told the outcome is unknown, decides whether to send again).
   */
  private async sendOne(target: QueueTarget, message: PreparedMessage): Promise<string> {
    const [out] = this.envelopes(target, [message], undefined, this.clock());
    if (!out) throw new Error('unreachable: one message makes one envelope');
    try {
      await this.messages.send(target.sqsUrl, out.body, out.delaySeconds);
    } catch (err) {
      throw unavailable(target, 1, err);
    }
    await this.onSent?.(target, dueOf([out]));
    return out.messageId;
  }

  /**
   * 1..100 messages, all or nothing: with more than one message every envelope carries a fresh
   * commit id, and the commit record is written only after SQS accepted every entry. Messages of
   * a send that never commits are discarded by the dispatcher, so a rejection delivers nothing.
   */
  async sendBatch(target: QueueTarget, messages: unknown): Promise<string[]> {
    const prepared = prepareBatch(messages);
    const [only] = prepared;
    if (prepared.length === 1 && only) return [await this.sendOne(target, only)];
    const commitId = this.newCommitId();
    const acceptedAt = this.clock();
    const outgoing = this.envelopes(target, prepared, commitId, acceptedAt);
    const onlyCopies: Record<string, string> = {};
    try {
      await this.sendChunks(target, chunk(outgoing), onlyCopies);
    } catch (err) {
      throw unavailable(target, outgoing.length, err);
    }
    // Past the longest retention, not the queue's current one: an update may raise it later.
    const expiresAt = recordExpiry(this.clock());
    try {
      await retrying(async () => {
        if (this.clock() - acceptedAt > COMMIT_DEADLINE_MS) throw new Error('commit deadline passed');
        await this.commits.putCommit(
          commitId,
          expiresAt,
          Object.keys(onlyCopies).length > 0 ? onlyCopies : undefined,
        );
      });
    } catch (err) {
      throw unavailable(target, outgoing.length, err);
    }
    await this.onSent?.(target, dueOf(outgoing));
    return outgoing.map((o) => o.messageId);
  }

  private envelopes(
    target: QueueTarget,
    messages: PreparedMessage[],
    commit: string | undefined,
    now: number,
  ): Outgoing[] {
    const seen = new Set<string>();
    return messages.map((m, i) => {
      const delay = m.delaySeconds ?? target.defaultDelaySeconds;
      const id = this.newMessageId(now);
      if (id.length < 1 || id.length > 256 || seen.has(id))
        throw new Error('message id generator broke its contract');
      seen.add(id);
      const body = encodeEnvelope({
        id,
        ts: now,
        body: m.body,
        ...(delay > MESSAGE_LIMITS.sqsMaxDelaySeconds ? { notBefore: now + delay * 1000 } : {}),
        ...(commit !== undefined ? { commit } : {}),
        ...(this.onSent ? {} : { unannounced: true as const }),
      });
      return {
        entryId: `e${i}`,
        messageId: id,
        body,
        delaySeconds: Math.min(delay, MESSAGE_LIMITS.sqsMaxDelaySeconds),
      };
    });
  }

  /** Chunks run a few at a time; after the first failure no further chunk starts. */
  private async sendChunks(
    target: QueueTarget,
    chunks: Outgoing[][],
    onlyCopies: Record<string, string>,
  ): Promise<void> {
    let next = 0;
    let failure: { err: unknown } | undefined;
    const worker = async () => {
      while (failure === undefined && next < chunks.length) {
        const current = chunks[next++] as Outgoing[];
        try {
          await this.sendChunk(target, current, onlyCopies);
        } catch (err) {
          failure ??= { err };
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(PARALLEL_CHUNKS, chunks.length) }, worker));
    if (failure) throw failure.err;
  }

  /**
   * One SendMessageBatch; entries SQS reports as failed are sent again, a bounded number of times.
   * A request the SDK sent more than once may have left extra copies of its entries (a try whose
   * answer was lost): the copy each such entry ends with is noted in `onlyCopies`, which the
   * commit record carries, so that registration removes the others unseen (DL-07).
   */
  private async sendChunk(
    target: QueueTarget,
    entries: Outgoing[],
    onlyCopies: Record<string, string>,
  ): Promise<void> {
    let pending = entries;
    const doubtful = new Set<string>();
    for (let attempt = 1; ; attempt++) {
      const {
        failed: failures,
        queueIds,
        resent,
      } = await this.messages.sendBatch(
        target.sqsUrl,
        pending.map((o) => ({ id: o.entryId, body: o.body, delaySeconds: o.delaySeconds })),
      );
      const failed = new Set(failures.map((f) => f.index));
      const sent = pending;
      for (const [i, o] of sent.entries()) {
        if (resent) doubtful.add(o.messageId);
        const queueId = queueIds.get(i);
        if (!failed.has(i) && doubtful.has(o.messageId) && queueId) onlyCopies[o.messageId] = queueId;
      }
      pending = sent.filter((_, i) => failed.has(i));
      if (pending.length === 0) return;
      if (attempt >= MAX_TRIES) {
        const codes = [...new Set(failures.map((f) => f.code ?? 'unknown'))].slice(0, 5);
        throw Object.assign(new Error('SQS kept refusing batch entries'), { code: codes.join(',') });
      }
      await sleep(RETRY_BASE_MS * 2 ** (attempt - 1));
    }
  }
}

function chunk(outgoing: Outgoing[]): Outgoing[][] {
  return bySendLimits(outgoing, (o) => o.body);
}

async function retrying(fn: () => Promise<void>): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      if (attempt >= MAX_TRIES) throw err;
      await sleep(RETRY_BASE_MS * 2 ** (attempt - 1));
    }
  }
}

function unavailable(target: QueueTarget, messages: number, err: unknown): NamedError {
  log.warn('queue send failed', { queueUid: target.queueUid, messages, err });
  if ((err as Error)?.name === SEND_OUTCOME_UNKNOWN)
    return new NamedError(
      'backend_unavailable',
      'the queue backend’s answer was lost: the message may have been enqueued; sending it again may deliver it twice',
    );
  return new NamedError('backend_unavailable', 'the queue backend did not accept the messages');
}
