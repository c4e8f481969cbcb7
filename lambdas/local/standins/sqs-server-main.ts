/**
 * Child-process entry for the SQS stand-in (fauxqs). fauxqs's own startFauxqs() listens on
 * every interface, so this builds its app with the same stores and persistence and listens on
 * 127.0.0.1 only. Prints one JSON line {"port":N} when ready; exits when stdin closes.
 */
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { OLDEST_AGE_PATH } from './sqs-queue-age.ts';
import { lengthenReceiveResponse, shortenRequest } from './sqs-receipt-handles.ts';

const { values } = parseArgs({ options: { 'data-dir': { type: 'string' }, port: { type: 'string' } } });
// The package exports only its root module; its stores and persistence are reached by file path.
const dist = path.dirname(fileURLToPath(import.meta.resolve('fauxqs')));
const load = (file: string) => import(pathToFileURL(path.join(dist, file)).href);

const { buildApp } = await load('app.js');
const { SqsStore, SqsQueue } = await load('sqs/sqsStore.js');
const { SnsStore } = await load('sns/snsStore.js');
const { S3Store } = await load('s3/s3Store.js');
const { PersistenceManager } = await load('persistence.js');

// fauxqs 2.4.1 answers every waiting long poll of a queue when one message arrives: the first
// takes it, the others return empty at once. SQS keeps a long poll waiting until it has messages
// for it or its wait ends, so one message ends one poll. Waking every poll counted receives SQS
// never bills and ended idle waits early. Here the polls wake one at a time, the next only once
// the last one's receive has run (a macrotask later) and messages are still there.
const wakeAll = SqsQueue.prototype.notifyWaiters;
SqsQueue.prototype.notifyWaiters = function notifyOne(this: {
  isFifo(): boolean;
  messages: unknown[];
  pollWaiters: { resolve(): void; timer: NodeJS.Timeout }[];
  wakingOne?: boolean;
}) {
  if (this.isFifo()) return wakeAll.call(this);
  if (this.wakingOne || this.messages.length === 0) return;
  const waiter = this.pollWaiters.shift();
  if (!waiter) return;
  clearTimeout(waiter.timer);
  this.wakingOne = true;
  waiter.resolve();
  setImmediate(() => {
    this.wakingOne = false;
    if (this.messages.length > 0) SqsQueue.prototype.notifyWaiters.call(this);
  });
};

const sqsStore = new SqsStore();
const snsStore = new SnsStore();
const s3Store = new S3Store();
const dataDir = values['data-dir'];
const persistence = dataDir ? new PersistenceManager(dataDir) : undefined;
if (persistence) {
  // fauxqs 2.4.1 persists "visible again" (ChangeMessageVisibility 0) by writing NULL into the
  // NOT NULL receive count: the write fails after the message has left the in-flight set and
  // before it rejoins the visible list, so the message vanished from the running server (found
  // by the chaos suite). Clear only the in-flight fields; the count stays as it was.
  const ready = persistence.db.prepare(
    'UPDATE sqs_messages SET receipt_handle = NULL, visibility_deadline = NULL WHERE message_id = ?',
  );
  persistence.updateMessageReady = (messageId: string) => {
    ready.run(messageId);
  };
  // Load before wiring persistence in, as fauxqs does, so loading does not rewrite rows.
  persistence.load(sqsStore, snsStore, s3Store);
  sqsStore.persistence = persistence;
  snsStore.persistence = persistence;
  s3Store.persistence = persistence;
  for (const queue of sqsStore.allQueues()) queue.persistence = persistence;
}
const app = buildApp({ logger: false, stores: { sqsStore, snsStore, s3Store } });
// fauxqs returns a message whose visibility ran out to the visible set only when its queue is
// next received from, so GetQueueAttributes counted it as in flight until then. SQS counts it as
// visible again, and the dispatcher's supervisor starts lanes from that count: bring the asked
// queue up to date first.
app.addHook('preHandler', async (request: { headers: Record<string, unknown>; body: unknown }) => {
  if (request.headers['x-amz-target'] !== 'AmazonSQS.GetQueueAttributes') return;
  const url = (request.body as { QueueUrl?: unknown } | undefined)?.QueueUrl;
  if (typeof url === 'string') sqsStore.getQueue(url)?.processTimers();
});
// SQS allows one PurgeQueue per queue per 60 seconds and refuses another with
// PurgeQueueInProgress; fauxqs purges every time. Refused here the same way, so the Host's
// `429 rate_limited` answer is the same locally as on AWS.
const PURGE_INTERVAL_MS = 60_000;
const purgedAt = new Map<string, number>();
const queueKey = (url: string) => url.slice(url.lastIndexOf('/') + 1);
app.addHook(
  'preHandler',
  async (
    request: { headers: Record<string, unknown>; body: unknown },
    reply: {
      code(n: number): typeof reply;
      header(k: string, v: string): typeof reply;
      send(b: unknown): unknown;
    },
  ) => {
    if (request.headers['x-amz-target'] !== 'AmazonSQS.PurgeQueue') return;
    const url = (request.body as { QueueUrl?: unknown } | undefined)?.QueueUrl;
    const last = typeof url === 'string' ? purgedAt.get(queueKey(url)) : undefined;
    if (last === undefined || Date.now() - last >= PURGE_INTERVAL_MS) return;
    return reply
      .code(400)
      .header('content-type', 'application/x-amz-json-1.0')
      .header('x-amzn-query-error', 'AWS.SimpleQueueService.PurgeQueueInProgress;Sender')
      .send({
        __type: 'com.amazonaws.sqs#PurgeQueueInProgress',
        message: 'Only one PurgeQueue operation on a queue is allowed every 60 seconds.',
      });
  },
);
app.addHook(
  'onResponse',
  async (request: { headers: Record<string, unknown>; body: unknown }, reply: { statusCode: number }) => {
    const url = (request.body as { QueueUrl?: unknown } | undefined)?.QueueUrl;
    if (
      request.headers['x-amz-target'] === 'AmazonSQS.PurgeQueue' &&
      reply.statusCode === 200 &&
      typeof url === 'string'
    ) {
      purgedAt.set(queueKey(url), Date.now());
    }
  },
);
// Receipt handles of SQS's length outside, fauxqs's own inside (see sqs-receipt-handles.ts).
app.addHook('preHandler', async (request: { headers: Record<string, unknown>; body: unknown }) => {
  const target = request.headers['x-amz-target'];
  if (typeof target === 'string' && target.startsWith('AmazonSQS.')) {
    shortenRequest(request.body as Parameters<typeof shortenRequest>[0]);
  }
});
app.addHook(
  'onSend',
  async (request: { headers: Record<string, unknown> }, _reply: unknown, payload: unknown) =>
    request.headers['x-amz-target'] === 'AmazonSQS.ReceiveMessage' && typeof payload === 'string'
      ? lengthenReceiveResponse(payload)
      : payload,
);
// What CloudWatch's ApproximateAgeOfOldestMessage tells on AWS, which no local SQS has: the age
// of the oldest due message (visible or in flight), for the operator's queue stats.
app.get(OLDEST_AGE_PATH, async (request: { query: Record<string, unknown> }) => {
  const url = request.query.queue;
  const queue = typeof url === 'string' ? sqsStore.getQueue(url) : undefined;
  if (!queue) return { ageSeconds: null };
  queue.processTimers();
  const { ready, inflight } = queue.inspectMessages();
  const sent = [...ready, ...inflight.map((e: { message: unknown }) => e.message)].map(
    (m: { sentTimestamp?: number }) => m.sentTimestamp ?? Number.POSITIVE_INFINITY,
  );
  const oldest = Math.min(...sent);
  return {
    ageSeconds: Number.isFinite(oldest) ? Math.max(0, Math.floor((Date.now() - oldest) / 1000)) : null,
  };
});
if (persistence) app.addHook('preClose', () => persistence.close());
const address: string = await app.listen({ host: '127.0.0.1', port: Number(values.port ?? 0) });
process.stdout.write(`${JSON.stringify({ port: Number(new URL(address).port) })}\n`);

let closing = false;
const close = () => {
  if (closing) return;
  closing = true;
  app.close().finally(() => process.exit(0));
};
process.on('SIGTERM', close);
process.on('SIGINT', close);
process.stdin.on('end', close);
process.stdin.on('error', close);
process.stdin.resume();
