/**
 * The wire protocol between a worker runtime (a ModuleWorker Lambda) and the Host's batch-host
 * function: one synchronous Lambda invocation per call. Every field is bounded and validated on
 * the Host side with these schemas; the worker side uses the same types to build calls.
 *
 * Bodies travel as base64. A synchronous Lambda invocation carries at most 6 MB (6,291,456 bytes)
 * of request payload and 6 MB of response (AWS Lambda quotas, "Invocation payload (request and
 * response)"), so calls that carry bodies are kept under PAYLOAD_LIMIT_BYTES: `produce` refuses a
 * larger batch with `batch_too_large`, and dead-letter moves are split into several calls.
 */
import { z } from 'zod';
import { MESSAGE_LIMITS } from './limits.ts';
import { SETTLE_GROUP_LIMIT } from './settlement-protocol.ts';

/** What one call may carry: 6 MB less room for the JSON envelope around the bodies. */
export const PAYLOAD_LIMIT_BYTES = 6_000_000;

const id = z.string().min(1).max(256);
const uid = z.string().min(1).max(128);
const handle = z.string().min(1).max(4096);
const epochMs = z.number().int().nonnegative().max(8.64e15);
const credential = z.string().min(1).max(256);
const delay = z.number().int().min(0).max(MESSAGE_LIMITS.maxDelaySeconds);
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
/** Canonical base64 of at most 127000 bytes (4 * ceil(127000 / 3) characters). */
const base64Body = z
  .string()
  .max(4 * Math.ceil(MESSAGE_LIMITS.maxBodyBytes / 3))
  .regex(BASE64);

export const slotSchema = z.strictObject({
  batchId: id,
  consumerUid: uid,
  generation: z.number().int().nonnegative(),
  queueUid: uid,
  queueName: z.string().min(1).max(256),
  sqsUrl: z.string().min(1).max(2048),
  maxBatchSize: z.number().int().min(1).max(MESSAGE_LIMITS.maxBatchMessages),
  maxBatchTimeoutSeconds: z.number().int().min(0).max(3600),
  deadline: epochMs,
  invisibleUntil: epochMs,
  workerUid: uid,
  workerSpace: z.string().min(1).max(128),
  workerName: z.string().min(1).max(128),
  workerFunction: z.string().min(1).max(2048),
  wakeSeq: z.number().int().nonnegative().optional(),
  taken: z
    .strictObject({
      at: epochMs,
      held: z.number().int().min(0).max(250),
      // At most every other slot of the consumer (maxConcurrency ≤ 250).
      due: z.record(id, epochMs).refine((due) => Object.keys(due).length < 250, 'too many slots'),
      receiving: z.number().int().min(0).max(250).optional(),
      watchUntil: epochMs.optional(),
      partial: z.literal(true).optional(),
    })
    .optional(),
  maxConcurrency: z.number().int().min(1).max(250),
  maxRetries: z.number().int().min(0).max(100),
  retryDelaySeconds: z.number().int().min(0).max(MESSAGE_LIMITS.maxDelaySeconds),
  handlerMs: z.number().int().positive().max(86_400_000),
  contextReadAt: epochMs.optional(),
  cohort: z.literal(true).optional(),
  seal: z.string().min(1).max(128),
});

/** A sealed lane context a lane starts with (`InheritedLane`): the slot's fields less the batch's. */
export const inheritedLaneSchema = slotSchema
  .omit({
    batchId: true,
    deadline: true,
    invisibleUntil: true,
    wakeSeq: true,
    taken: true,
    cohort: true,
  })
  // The lane's rank in a supervisor round's cohort (below maxConcurrency).
  .extend({ cohort: z.number().int().min(0).max(249).optional() });

const receivedSchema = z.strictObject({
  receiptHandle: handle,
  receivedAt: epochMs,
  sentAt: epochMs.optional(),
  queueMessageId: z.string().min(1).max(128).optional(),
  envelope: z.strictObject({
    id,
    ts: z.number().finite(),
    notBefore: z.number().finite().optional(),
    commit: z.string().min(1).max(256).optional(),
  }),
});

const manifestEntrySchema = z.strictObject({
  id,
  ts: z.number().finite(),
  attempts: z.number().int().min(0).max(1_000),
  hadRecord: z.boolean(),
  // Every copy SQS handed to the batch (duplicates ride with their first copy).
  handles: z.array(handle).max(MESSAGE_LIMITS.maxBatchMessages).optional(),
  receivedAt: epochMs.optional(),
});

/** A batch's manifest as registration handed it to the runner, with the Host's seal. */
const sealedManifestSchema = z.strictObject({
  entries: z.array(manifestEntrySchema).max(MESSAGE_LIMITS.maxBatchMessages),
  moves: z.array(manifestEntrySchema).max(MESSAGE_LIMITS.maxBatchMessages),
  seal: z.string().min(1).max(128),
});

const settleCallSchema = z.discriminatedUnion('kind', [
  z.strictObject({ kind: z.literal('ack'), index: z.number().int().min(0).max(999) }),
  z.strictObject({
    kind: z.literal('retry'),
    index: z.number().int().min(0).max(999),
    delaySeconds: delay.optional(),
  }),
  z.strictObject({ kind: z.literal('ackAll') }),
  z.strictObject({ kind: z.literal('retryAll'), delaySeconds: delay.optional() }),
]);

export const batchHostRequestSchema = z.discriminatedUnion('action', [
  z.strictObject({
    action: z.literal('acquire'),
    previous: slotSchema,
    credential,
  }),
  z.strictObject({
    action: z.literal('register'),
    slot: slotSchema,
    received: z.array(receivedSchema).max(MESSAGE_LIMITS.maxBatchMessages),
    /** The lane goes on: an empty receive a send woke answers with the lane's next slot. */
    goOn: z.boolean().optional(),
    /** How long the first of the received messages stays hidden from the call (SQS's 12 h at most). */
    visibleForMs: z.number().int().min(0).max(43_200_000).optional(),
  }),
  z.strictObject({ action: z.literal('settle'), batchId: id, credential, call: settleCallSchema }),
  // A group of settle calls of one batch, applied in order; answered with one result per call.
  z.strictObject({
    action: z.literal('settleMany'),
    batchId: id,
    credential,
    calls: z.array(settleCallSchema).min(1).max(SETTLE_GROUP_LIMIT),
  }),
  z.strictObject({
    action: z.literal('finalize'),
    slot: slotSchema,
    credential,
    outcome: z.enum(['returned', 'threw', 'abandoned']),
    /** The lane goes on: the answer carries its next slot (the Host hands this one over). */
    next: z.boolean().optional(),
    /** Registration's sealed manifest: the Host then need not read it back. */
    manifest: sealedManifestSchema.optional(),
    // The handler's error for operators' consumer state: name and message, never a stack.
    error: z.strictObject({ name: z.string().max(128), message: z.string().max(300) }).optional(),
    /** The handler was cut off and may still run: its slot stays held until its deadline. */
    handlerMayRun: z.boolean().optional(),
  }),
  z.strictObject({
    action: z.literal('deadLetter'),
    slot: slotSchema,
    credential,
    // Bodies only: which messages are moved, and where their originals are, the Host knows.
    items: z.array(z.strictObject({ id, body: base64Body })).max(MESSAGE_LIMITS.maxBatchMessages),
    /** The last part of the batch's moves: the batch then ends and frees its slot. */
    last: z.boolean(),
  }),
  z.strictObject({
    action: z.literal('defer'),
    slot: slotSchema,
    // Messages registration found due much later: the Host sends each again as a delayed copy
    // and deletes the handles (deferrals.ts), checking each is due late enough and no later than
    // the longest delay.
    items: z
      .array(
        z.strictObject({
          receiptHandles: z.array(handle).min(1).max(MESSAGE_LIMITS.maxBatchMessages),
          id,
          ts: z.number().finite(),
          notBefore: epochMs,
          body: base64Body,
        }),
      )
      .max(MESSAGE_LIMITS.maxBatchMessages),
  }),
  z.strictObject({
    action: z.literal('produce'),
    batchId: id,
    credential,
    binding: z.string().min(1).max(128),
    // Sizes, counts and fields besides `body` are left to the producer rules (AQ-04), which
    // answer with the Form's error names; only the call's own bound is enforced here.
    messages: z.array(z.looseObject({ body: z.string().max(PAYLOAD_LIMIT_BYTES).regex(BASE64) })).max(1000),
  }),
]);

export type BatchHostRequest = z.infer<typeof batchHostRequestSchema>;

/** Every answer: a value, or an Error's name and a fixed, secret-free message. */
export type BatchHostResponse =
  | { ok: true; value: unknown }
  | { ok: false; error: { name: string; message: string } };

/** Rejections a settlement call may surface to worker code, with their fixed messages. */
export const SETTLE_ERRORS: Readonly<Record<string, string>> = {
  TypeError: 'invalid settlement arguments',
  unknown_batch: 'the batch is not open for settlement',
  already_settled: 'the message was settled already',
  backend_unavailable: 'the settlement could not be recorded',
};

/** Rejections a producer call may surface to worker code (AtLeastOnceQueue 0.2.0). */
export const PRODUCE_ERRORS: Readonly<Record<string, string>> = {
  invalid_body: 'the message is not acceptable',
  message_too_large: `a message body is larger than ${MESSAGE_LIMITS.maxBodyBytes} bytes`,
  batch_too_large: 'the batch is too large',
  backend_unavailable: 'the messages could not be accepted',
};

/** The wire form of a rejection: a listed name with its fixed message, else `backend_unavailable`. */
export function wireError(err: unknown, table: Readonly<Record<string, string>>) {
  const given = err instanceof Error ? err.name : '';
  const name = Object.hasOwn(table, given) ? given : 'backend_unavailable';
  return { name, message: table[name] ?? 'the Host could not complete the call' };
}

export const toBase64 = (bytes: Uint8Array) =>
  Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64');
export const fromBase64 = (text: string) => new Uint8Array(Buffer.from(text, 'base64'));
