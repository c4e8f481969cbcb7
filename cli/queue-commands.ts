import { readFileSync } from 'node:fs';
import { type Context, checkedName } from './context.ts';
import { RefusedError, UsageError, whyUnreadable } from './errors.ts';
import { EXT_ROOT, type Json, type Resource } from './host-client.ts';
import { KINDS } from './kinds.ts';

/** The redrive endpoint moves at most this many messages per request. */
const REDRIVE_PER_REQUEST = 100;

const queuePath = (uid: string, action: string) => `${EXT_ROOT}/queues/${encodeURIComponent(uid)}/${action}`;

function bodyBytes(text: string | undefined, file: string | undefined): Buffer {
  if ((text === undefined) === (file === undefined)) {
    throw new UsageError('send takes the message as TEXT or as --file F (- for stdin): exactly one of them');
  }
  if (text !== undefined) return Buffer.from(text, 'utf8');
  try {
    return readFileSync(file === '-' ? 0 : (file as string));
  } catch (err) {
    throw new UsageError(`cannot read ${file}: ${whyUnreadable(err)}`);
  }
}

/** `send QUEUE [TEXT] [--file F] [--delay S]`: one message through the producer extension. */
export async function send(
  ctx: Context,
  queueName: string,
  text: string | undefined,
  o: { file?: string; delay?: number },
): Promise<void> {
  const body = bodyBytes(text, o.file);
  const q = await ctx.queue(queueName);
  const message: Record<string, unknown> = { body: body.toString('base64') };
  if (o.delay !== undefined) message.delaySeconds = o.delay;
  // Not retried: a send is not idempotent, and a retry could send the message twice.
  const out = await ctx.client.request('POST', queuePath(q.uid, 'messages'), {
    body: { messages: [message] },
    idempotent: false,
  });
  const [id] = out.messageIds as string[];
  ctx.line(id as string);
  ctx.document({ queue: queueName, messageId: id });
}

const depth = (s: Json) => s.visible + s.inFlight + s.delayed;
const age = (s: Json) => (s.oldestAgeSeconds === null ? '-' : `${s.oldestAgeSeconds} s`);

/** `status [QUEUE]`: per queue its counts, its consumer's state and its dead-letter queue's depth. */
export async function status(ctx: Context, queueName: string | undefined): Promise<void> {
  const space = await ctx.space();
  const [all, consumers] = await Promise.all([
    ctx.client.list(space, { form: KINDS.queue }),
    ctx.client.list(space, { form: KINDS.consumer }),
  ]);
  const nameOf = new Map(all.map((q) => [q.uid, q.name]));
  const queues = queueName === undefined ? all : [await ctx.queue(queueName)];
  const report: Json[] = [];
  for (const q of queues) {
    const stats = await ctx.client.request('GET', queuePath(q.uid, 'stats'));
    const consumer = consumers.find((c) => c.spec?.queue?.resourceUid === q.uid);
    const entry: Json = { ...stats, consumer: null };
    ctx.line(
      `queue ${q.name}: visible ${stats.visible}, in flight ${stats.inFlight}, delayed ${stats.delayed}, oldest ${age(stats)}`,
    );
    if (consumer) entry.consumer = await consumerStatus(ctx, consumer, nameOf);
    report.push(entry);
  }
  if (queues.length === 0) ctx.note(`no queues in Space ${space}`);
  ctx.document({ space, queues: report });
}

async function consumerStatus(ctx: Context, c: Resource, nameOf: ReadonlyMap<string, string>): Promise<Json> {
  const state = await ctx.client.request('GET', `${EXT_ROOT}/consumers/${encodeURIComponent(c.uid)}/state`);
  const s = c.spec;
  // A slot without a running batch is a lane receiving (an idle lane's long poll, say).
  const receiving = Math.max(0, state.slotsHeld - state.runningBatches);
  ctx.line(
    `  consumer ${c.name}: ${state.state}, running ${state.runningBatches}/${s.maxConcurrency} batches` +
      `, ${receiving} ${receiving === 1 ? 'lane' : 'lanes'} receiving, batch ≤ ${s.maxBatchSize} within ${s.maxBatchTimeoutSeconds} s,` +
      ` ${s.maxRetries} retries after ${s.retryDelaySeconds} s`,
  );
  const recent = (state.recentBatches ?? []) as Json[];
  const newest = recent[0];
  if (newest) {
    const attempts = newest.attempts ? `attempt ${newest.attempts.max}` : 'no messages';
    ctx.line(
      `  last batch: ${newest.outcome}, ${newest.messages} messages (${newest.acknowledged} acknowledged,` +
        ` ${newest.retried} retried, ${newest.exhausted} out of retries), ${attempts},` +
        ` ${newest.durationMs ?? '?'} ms, ${new Date(newest.endedAt).toISOString()}; ${recent.length} recent`,
    );
  }
  const e = state.lastHandlerError;
  ctx.line(
    e
      ? `  last handler error: ${e.name}: ${e.message} (batch ${e.batchId}, ${new Date(e.at).toISOString()})`
      : '  last handler error: none',
  );
  const out: Json = { name: c.name, ...state, deadLetterQueue: null };
  const dlqUid: string | undefined = s.deadLetterQueue?.resourceUid;
  if (dlqUid) {
    const d = await ctx.client.request('GET', queuePath(dlqUid, 'stats'));
    const name = nameOf.get(dlqUid) ?? dlqUid;
    ctx.line(`  dead letters: ${name}, ${depth(d)} messages`);
    out.deadLetterQueue = { name, queueUid: dlqUid, depth: depth(d) };
  }
  return out;
}

export interface PeekOptions {
  limit?: number;
  /** Only dead letters moved from this queue (a name). */
  from?: string;
  /** Only dead letters whose last delivery ended so (`threw` matches `threw/retry` too). */
  outcome?: string;
}

/** `dlq peek QUEUE [--limit N] [--from QUEUE] [--outcome O]`: messages without consuming them. */
export async function peek(ctx: Context, queueName: string, o: PeekOptions): Promise<void> {
  const q = await ctx.queue(queueName);
  const body: Record<string, unknown> = {};
  if (o.limit !== undefined) body.limit = o.limit;
  if (o.from !== undefined) body.sourceQueue = checkedName(o.from, '--from');
  if (o.outcome !== undefined) body.lastOutcome = o.outcome;
  const out = await ctx.client.request('POST', queuePath(q.uid, 'peek'), { body });
  for (const m of out.messages as Json[]) {
    const when = m.timestampMillis === null ? '-' : new Date(m.timestampMillis).toISOString();
    let line = `${m.id ?? '(not a Host message)'}  ${when}  ${m.sizeBytes} B  ${JSON.stringify(m.preview)}`;
    if (m.deadLetter) {
      const d = m.deadLetter;
      line += `  from ${d.sourceQueueName} (id ${d.originalId}), ${d.attempts} attempts, last ${d.lastOutcome}`;
    }
    ctx.line(line);
  }
  if (out.messages.length === 0) {
    ctx.note(
      `queue ${queueName} has no visible messages${Object.keys(body).some((k) => k !== 'limit') ? ' that match' : ''}`,
    );
  }
  ctx.document({ queue: queueName, messages: out.messages });
}

/** Chosen ids go in requests of at most this many. */
const IDS_PER_REQUEST = 100;

function chunks<T>(items: readonly T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

/** Ids asked for and not found: said after what was done, and the command fails (exit 1). */
function refuseNotFound(queueName: string, notFound: readonly string[]): void {
  if (notFound.length === 0) return;
  throw new RefusedError(
    'not_found',
    `queue ${queueName} has no visible message ${notFound.join(', ')} (peek it to see its ids; a message a batch holds is not visible)`,
  );
}

/** `dlq redrive QUEUE --to QUEUE --id ID…`: moves just these messages; the rest stay. */
async function redriveChosen(ctx: Context, from: string, to: string, ids: readonly string[]): Promise<void> {
  const [source, target] = await Promise.all([ctx.queue(from), ctx.queue(to)]);
  const messageIds: string[] = [];
  const notFound: string[] = [];
  let skipped = 0;
  for (const part of chunks(ids, IDS_PER_REQUEST)) {
    const out = await ctx.client.request('POST', queuePath(source.uid, 'redrive'), {
      body: { to: target.uid, messageIds: part },
    });
    messageIds.push(...out.messageIds);
    notFound.push(...out.notFound);
    skipped += out.skipped;
  }
  ctx.line(
    `moved ${messageIds.length} messages from ${from} to ${to}${skipped ? ` (${skipped} left: not movable)` : ''}`,
  );
  ctx.document({ from, to, moved: messageIds.length, skipped, messageIds, notFound });
  refuseNotFound(from, notFound);
}

/** `dlq redrive QUEUE --to QUEUE [--limit N | --id ID…]`: moves messages as new ones, request by request. */
export async function redrive(
  ctx: Context,
  from: string,
  to: string,
  o: { limit?: number; ids?: string[] },
): Promise<void> {
  if (o.ids !== undefined && o.limit !== undefined) throw new UsageError('give --limit or --id, not both');
  if (o.ids !== undefined) return redriveChosen(ctx, from, to, o.ids);
  const limit = o.limit;
  const [source, target] = await Promise.all([ctx.queue(from), ctx.queue(to)]);
  let moved = 0;
  let skipped = 0;
  const messageIds: string[] = [];
  for (;;) {
    const want = Math.min(REDRIVE_PER_REQUEST, (limit ?? Number.POSITIVE_INFINITY) - moved);
    if (want <= 0) break;
    const out = await ctx.client.request('POST', queuePath(source.uid, 'redrive'), {
      body: { to: target.uid, limit: want },
    });
    moved += out.moved;
    skipped += out.skipped;
    messageIds.push(...out.messageIds);
    if (out.moved < want) break;
  }
  ctx.line(
    `moved ${moved} messages from ${from} to ${to}${skipped ? ` (${skipped} left: not movable)` : ''}`,
  );
  ctx.document({ from, to, moved, skipped, messageIds });
}

/** `purge QUEUE --yes [--id ID…]`: deletes every message of the queue, or just the chosen ones. */
export async function purge(ctx: Context, queueName: string, yes: boolean, ids?: string[]): Promise<void> {
  const what = ids === undefined ? 'every message' : `${ids.length} chosen messages`;
  if (!yes) throw new UsageError(`purge deletes ${what} of ${queueName}: confirm with --yes`);
  const q = await ctx.queue(queueName);
  if (ids !== undefined) {
    const deleted: string[] = [];
    const notFound: string[] = [];
    for (const part of chunks(ids, IDS_PER_REQUEST)) {
      const out = await ctx.client.request('POST', queuePath(q.uid, 'purge'), { body: { messageIds: part } });
      deleted.push(...out.deleted);
      notFound.push(...out.notFound);
    }
    ctx.line(`deleted ${deleted.length} messages of ${queueName}`);
    ctx.document({ queue: queueName, purged: false, deleted, notFound });
    return refuseNotFound(queueName, notFound);
  }
  await ctx.client.request('POST', queuePath(q.uid, 'purge'));
  ctx.line(`purged ${queueName}`);
  ctx.document({ queue: queueName, purged: true });
}
