/**
 * SQS's size limits, enforced on the client for the local stand-in, which does not enforce them:
 * fauxqs's default `MaximumMessageSize` is 1 MiB and it never checks a batch's total. AWS refuses
 * these requests, so the local Host must too, or code that only works locally ships.
 *
 * 262,144 bytes is the most this client lets through, per message and per batch request. Each
 * Host queue's own `MaximumMessageSize` is lower (`QUEUE_MAX_MESSAGE_BYTES`, the Host's largest
 * envelope), and the stand-in refuses past it as SQS does. SQS counts a message as its body plus its message attributes (each
 * attribute's name, data type and value); a SendMessageBatch is limited to the same total over
 * all of its entries.
 *
 * - SendMessage over the limit → `InvalidParameterValue` ("Message must be shorter than …").
 * - SendMessageBatch whose entries together exceed it → `BatchRequestTooLong`.
 *
 * Both are thrown before the request is sent, as the errors SQS answers with (400, client fault),
 * so nothing reaches the queue and the SDK does not retry them.
 *
 * The in-flight and visibility limits (issue 12). fauxqs 2.4.1 already refuses a VisibilityTimeout
 * outside 0..43,200 s on ReceiveMessage, ChangeMessageVisibility(Batch) and queue attributes; it
 * lacks these two, added here:
 * - ReceiveMessage on a queue with ≥ 120,000 in-flight messages → `OverLimit` for a short poll;
 *   a long poll (WaitTimeSeconds > 0) waits its time and answers no messages, no error, as SQS
 *   documents (so a consumer past the limit sees an empty queue, not a failure). The count is the
 *   queue's ApproximateNumberOfMessagesNotVisible, fetched at most once a second per queue (plus
 *   what this client received since), so it is approximate as SQS's own is: a burst can overshoot
 *   by what arrives within that second. The limit can be lowered for tests (option `inflightLimit`,
 *   or `TAKOFORM_SQS_INFLIGHT_LIMIT`). When the count cannot be read the receive goes ahead.
 * - A message's visibility ends at most 12 h after the ReceiveMessage that returned it:
 *   ChangeMessageVisibility past that → `InvalidParameterValue`; in a ChangeMessageVisibilityBatch
 *   the entry fails with `InvalidParameterValue` (sender fault) and the others are applied. Receive
 *   times are recorded per receipt handle when the response arrives (SQS's clock starts a round
 *   trip earlier, so this is lenient by that much), in one process-wide map of at most 200,000
 *   handles, oldest forgotten first; a handle not in it (evicted, or received by another process)
 *   is not checked.
 */

import type {
  ChangeMessageVisibilityBatchRequestEntry,
  DeleteMessageBatchRequestEntry,
  MessageAttributeValue,
  SendMessageBatchRequestEntry,
  SQSClient,
} from '@aws-sdk/client-sqs';
import {
  BatchRequestTooLong,
  GetQueueAttributesCommand,
  OverLimit,
  SQSServiceException,
} from '@aws-sdk/client-sqs';
import { asNoFunction } from './call-recorder.ts';

/** What this client lets through, per message and per batch request (SQS's former default size). */
export const SQS_MAX_MESSAGE_BYTES = 262_144;
/** In-flight messages a standard queue allows (received, not deleted, not yet visible again). */
export const SQS_MAX_INFLIGHT = 120_000;
export const INFLIGHT_LIMIT_ENV = 'TAKOFORM_SQS_INFLIGHT_LIMIT';
/** How long after its receive a message may stay invisible, in seconds. */
export const SQS_MAX_VISIBILITY_SECONDS = 43_200;
const INFLIGHT_COUNT_TTL_MS = 1_000;
const MAX_TRACKED_HANDLES = 200_000;

const utf8 = (s: string | undefined) => (s === undefined ? 0 : Buffer.byteLength(s, 'utf8'));

function attributeBytes(attrs: Record<string, MessageAttributeValue> | undefined): number {
  let total = 0;
  for (const [name, v] of Object.entries(attrs ?? {})) {
    total += utf8(name) + utf8(v.DataType);
    if (v.StringValue !== undefined) total += utf8(v.StringValue);
    if (v.BinaryValue !== undefined) total += v.BinaryValue.byteLength;
  }
  return total;
}

/** The size SQS charges against `MaximumMessageSize`: body plus message attributes. */
export function sqsMessageBytes(
  body: string | undefined,
  attrs?: Record<string, MessageAttributeValue>,
): number {
  return utf8(body) + attributeBytes(attrs);
}

const metadata = () => ({ httpStatusCode: 400, requestId: 'takoform-strict-sqs' });

interface Args {
  input: Record<string, unknown>;
}
interface Result {
  output: Record<string, unknown>;
}
type Handler = (args: Args) => Promise<Result>;
type Middleware = (next: Handler, context: { commandName?: string }) => Handler;

const strictSizes: Middleware = (next, context) => async (args) => {
  if (context.commandName === 'SendMessageCommand') {
    const size = sqsMessageBytes(
      args.input.MessageBody as string | undefined,
      args.input.MessageAttributes as Record<string, MessageAttributeValue> | undefined,
    );
    if (size > SQS_MAX_MESSAGE_BYTES)
      throw new SQSServiceException({
        name: 'InvalidParameterValue',
        $fault: 'client',
        message: `One or more parameters are invalid. Reason: Message must be shorter than ${SQS_MAX_MESSAGE_BYTES} bytes.`,
        $metadata: metadata(),
      });
  } else if (context.commandName === 'SendMessageBatchCommand') {
    const entries = (args.input.Entries ?? []) as SendMessageBatchRequestEntry[];
    const size = entries.reduce((sum, e) => sum + sqsMessageBytes(e.MessageBody, e.MessageAttributes), 0);
    if (size > SQS_MAX_MESSAGE_BYTES)
      throw new BatchRequestTooLong({
        message: `Batch requests cannot be longer than ${SQS_MAX_MESSAGE_BYTES} bytes. You have sent ${size} bytes.`,
        $metadata: metadata(),
      });
  }
  return next(args);
};

// ---------------------------------------------------------------------------------------------
// The 12-hour visibility bound

/** Receive time by receipt handle; insertion order is receive order, so the oldest go first. */
const receivedAt = new Map<string, number>();
const MAX_VISIBILITY_MS = SQS_MAX_VISIBILITY_SECONDS * 1000;

function recordReceived(handles: (string | undefined)[], now: number): void {
  for (const h of handles) if (h) receivedAt.set(h, now);
  for (const [h, at] of receivedAt) {
    if (receivedAt.size <= MAX_TRACKED_HANDLES && now - at <= MAX_VISIBILITY_MS) break;
    receivedAt.delete(h);
  }
}

/** Why SQS would refuse to make `handle` invisible for `seconds` more, if it would. */
function beyondTwelveHours(handle: unknown, seconds: unknown, now: number): string | undefined {
  const at = typeof handle === 'string' ? receivedAt.get(handle) : undefined;
  if (at === undefined || typeof seconds !== 'number' || seconds === 0) return undefined;
  if (now - at + seconds * 1000 <= MAX_VISIBILITY_MS) return undefined;
  return `Value ${seconds} for parameter VisibilityTimeout is invalid. Reason: Total VisibilityTimeout for the message is beyond the limit [${SQS_MAX_VISIBILITY_SECONDS} seconds].`;
}

const twelveHours: Middleware = (next, context) => async (args) => {
  const now = Date.now();
  switch (context.commandName) {
    case 'ReceiveMessageCommand': {
      const result = await next(args);
      const messages = (result.output.Messages ?? []) as { ReceiptHandle?: string }[];
      recordReceived(
        messages.map((m) => m.ReceiptHandle),
        Date.now(),
      );
      return result;
    }
    case 'ChangeMessageVisibilityCommand': {
      const refused = beyondTwelveHours(args.input.ReceiptHandle, args.input.VisibilityTimeout, now);
      if (refused)
        throw new SQSServiceException({
          name: 'InvalidParameterValue',
          $fault: 'client',
          message: refused,
          $metadata: metadata(),
        });
      return next(args);
    }
    case 'ChangeMessageVisibilityBatchCommand': {
      const entries = (args.input.Entries ?? []) as ChangeMessageVisibilityBatchRequestEntry[];
      const failed = entries.flatMap((e) => {
        const refused = beyondTwelveHours(e.ReceiptHandle, e.VisibilityTimeout, now);
        return refused
          ? [{ Id: e.Id, SenderFault: true, Code: 'InvalidParameterValue', Message: refused }]
          : [];
      });
      if (failed.length === 0) return next(args);
      const refusedIds = new Set(failed.map((f) => f.Id));
      const kept = entries.filter((e) => !refusedIds.has(e.Id));
      const result: Result =
        kept.length > 0
          ? await next({ ...args, input: { ...args.input, Entries: kept } })
          : { output: { Successful: [], $metadata: { httpStatusCode: 200 } } };
      result.output.Failed = [...((result.output.Failed as unknown[] | undefined) ?? []), ...failed];
      result.output.Successful ??= [];
      return result;
    }
    case 'DeleteMessageCommand':
      receivedAt.delete(args.input.ReceiptHandle as string);
      return next(args);
    case 'DeleteMessageBatchCommand':
      for (const e of (args.input.Entries ?? []) as DeleteMessageBatchRequestEntry[])
        receivedAt.delete(e.ReceiptHandle as string);
      return next(args);
    default:
      return next(args);
  }
};

// ---------------------------------------------------------------------------------------------
// The in-flight limit

/** `TAKOFORM_SQS_INFLIGHT_LIMIT`, or SQS's 120,000; a malformed value throws. */
export function inflightLimitFromEnv(env: NodeJS.ProcessEnv = process.env): number {
  const raw = env[INFLIGHT_LIMIT_ENV]?.trim();
  if (!raw) return SQS_MAX_INFLIGHT;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1)
    throw new Error(`${INFLIGHT_LIMIT_ENV} must be a positive integer, not '${raw}'`);
  return n;
}

interface InflightCount {
  count: number;
}

function inflightLimit(client: Pick<SQSClient, 'send'>, limit: number): Middleware {
  /** Per queue URL: the latest read (shared by concurrent receives) and when it was started. */
  const reads = new Map<string, { count: Promise<InflightCount | undefined>; at: number }>();
  const read = (url: string) =>
    // Not the calling function's call: on AWS there is no such read (call-recorder.ts).
    asNoFunction(() =>
      client.send(
        new GetQueueAttributesCommand({
          QueueUrl: url,
          AttributeNames: ['ApproximateNumberOfMessagesNotVisible'],
        }),
      ),
    )
      .then((out) => ({ count: Number(out.Attributes?.ApproximateNumberOfMessagesNotVisible ?? 0) }))
      // The check is a stand-in's courtesy: when the count cannot be read, SQS decides.
      .catch(() => undefined);
  const current = (url: string) => {
    const now = Date.now();
    let entry = reads.get(url);
    if (!entry || now - entry.at > INFLIGHT_COUNT_TTL_MS) {
      entry = { count: read(url), at: now };
      reads.set(url, entry);
    }
    return entry.count;
  };
  return (next, context) => async (args) => {
    if (context.commandName !== 'ReceiveMessageCommand') return next(args);
    const url = args.input.QueueUrl as string;
    const known = await current(url);
    if (known && known.count >= limit) {
      // A long poll is not refused: it waits its time and comes back empty, as SQS's does.
      const wait = Number(args.input.WaitTimeSeconds ?? 0);
      if (wait > 0) {
        await new Promise((r) => setTimeout(r, Math.min(wait, 20) * 1000));
        return { output: { $metadata: { httpStatusCode: 200, requestId: 'takoform-strict-sqs' } } };
      }
      throw new OverLimit({
        message: `The maximum number of in flight messages (${limit}) is reached for this queue.`,
        $metadata: metadata(),
      });
    }
    const result = await next(args);
    if (known) known.count += ((result.output.Messages as unknown[] | undefined) ?? []).length;
    return result;
  };
}

export interface StrictSqsOptions {
  /** In-flight messages at which ReceiveMessage is refused (default `inflightLimitFromEnv()`). */
  inflightLimit?: number;
}

const applied = new WeakSet<object>();

/**
 * Makes `client` refuse what SQS refuses for size, in-flight count and visibility (see above);
 * applying it twice is a no-op.
 */
export function withStrictSqsLimits<C extends Pick<SQSClient, 'middlewareStack' | 'send'>>(
  client: C,
  opts: StrictSqsOptions = {},
): C {
  if (applied.has(client)) return client;
  applied.add(client);
  const stack = client.middlewareStack as unknown as { add(m: Middleware, o: Record<string, unknown>): void };
  const limit = opts.inflightLimit ?? inflightLimitFromEnv();
  stack.add(strictSizes, {
    name: 'takoformStrictSqsLimits',
    step: 'initialize',
    priority: 'high',
    override: true,
  });
  stack.add(inflightLimit(client, limit), {
    name: 'takoformStrictSqsInflight',
    step: 'initialize',
    priority: 'high',
    override: true,
  });
  stack.add(twelveHours, {
    name: 'takoformStrictSqsVisibility',
    step: 'initialize',
    priority: 'high',
    override: true,
  });
  return client;
}
