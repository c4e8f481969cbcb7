import { MESSAGE_LIMITS, NamedError } from '../delivery/limits.ts';
import type { BatchDelivery, SettleCall } from '../delivery/settlement-protocol.ts';

/** One message as a `queue` handler sees it (ModuleWorker 0.3.0 §runtime). */
export interface QueueMessage {
  readonly id: string;
  readonly timestampMillis: number;
  /** A copy of the message bytes, owned by this batch object alone. */
  readonly body: Uint8Array;
  readonly attempts: number;
}

/** The batch object handed to `queue(batch, env, ctx)` (ModuleWorker 0.3.0 §runtime, MW-03). */
export interface QueueBatch {
  readonly batchId: string;
  readonly queue: string;
  readonly messages: readonly QueueMessage[];
  acknowledge(messageId: string): Promise<void>;
  retry(messageId: string, delaySeconds?: number): Promise<void>;
  acknowledgeAll(): Promise<void>;
  retryAll(delaySeconds?: number): Promise<void>;
}

/** Which batch a settlement call is for, as a transport needs it to prove the call to the Host. */
export interface BatchAuth {
  readonly batchId: string;
  /** Never logged, never shown to worker code. */
  readonly credential: string;
}

/**
 * Carries settlement calls to the Host. It resolves once the settlement is durable and rejects
 * with an Error named `already_settled`, `unknown_batch` or `backend_unavailable` otherwise.
 * A transport already bound to one batch (the local worker thread's RPC) ignores `auth`; a shared
 * one (the AWS runtime adapter) sends it along.
 */
export interface SettleTransport {
  settle(call: SettleCall, auth: BatchAuth): Promise<void>;
}

/** `undefined`, or an integer in 0..43200 (-0 becomes 0); anything else is a TypeError. */
function checkDelay(delaySeconds: unknown): number | undefined {
  if (delaySeconds === undefined) return undefined;
  if (
    typeof delaySeconds !== 'number' ||
    !Number.isInteger(delaySeconds) ||
    delaySeconds < 0 ||
    delaySeconds > MESSAGE_LIMITS.maxDelaySeconds
  ) {
    throw new TypeError(`delaySeconds must be omitted or an integer in 0..${MESSAGE_LIMITS.maxDelaySeconds}`);
  }
  return delaySeconds + 0;
}

/**
 * Builds the frozen batch object for one delivery. The object, its `messages` array, each message
 * and each method are frozen; the only own properties are the four data fields and the four
 * methods, and the prototype is `Object.prototype`. The credential lives only in this closure and
 * in the `auth` argument passed to the transport: no property, symbol or prototype of the batch
 * reaches it.
 *
 * Every method returns a Promise and never throws synchronously. Argument errors reject with a
 * `TypeError` (host-profile §4); an id that is not in this batch rejects `unknown_message`
 * without calling the transport; everything else is the transport's answer, passed through.
 * Messages are addressed by their index; if a delivery ever carried one id twice, the id names
 * its first occurrence.
 */
export function createQueueBatch(delivery: BatchDelivery, transport: SettleTransport): QueueBatch {
  const { batchId, credential } = delivery;
  const indexOf = new Map<string, number>();
  const messages = delivery.messages.map((m, index) => {
    if (!indexOf.has(m.id)) indexOf.set(m.id, index);
    return Object.freeze({
      id: m.id,
      timestampMillis: m.timestampMillis,
      // A fresh buffer of exactly the body's length: nothing else (not the delivery's buffer,
      // not another message) is reachable through `body.buffer`.
      body: new Uint8Array(m.body),
      attempts: m.attempts,
    });
  });

  const send = async (call: SettleCall): Promise<void> => {
    await transport.settle(call, { batchId, credential });
  };
  const indexFor = (messageId: unknown): number => {
    if (typeof messageId !== 'string') throw new TypeError('messageId must be a string');
    const index = indexOf.get(messageId);
    if (index === undefined) throw new NamedError('unknown_message', 'this message is not in the batch');
    return index;
  };

  const acknowledge = async (messageId: string): Promise<void> => {
    const index = indexFor(messageId);
    await send({ kind: 'ack', index });
  };
  const retry = async (messageId: string, delaySeconds?: number): Promise<void> => {
    if (typeof messageId !== 'string') throw new TypeError('messageId must be a string');
    const delay = checkDelay(delaySeconds);
    const index = indexFor(messageId);
    await send(
      delay === undefined ? { kind: 'retry', index } : { kind: 'retry', index, delaySeconds: delay },
    );
  };
  const acknowledgeAll = async (): Promise<void> => {
    await send({ kind: 'ackAll' });
  };
  const retryAll = async (delaySeconds?: number): Promise<void> => {
    const delay = checkDelay(delaySeconds);
    await send(delay === undefined ? { kind: 'retryAll' } : { kind: 'retryAll', delaySeconds: delay });
  };

  return Object.freeze({
    batchId,
    queue: delivery.queue,
    messages: Object.freeze(messages),
    acknowledge: Object.freeze(acknowledge),
    retry: Object.freeze(retry),
    acknowledgeAll: Object.freeze(acknowledgeAll),
    retryAll: Object.freeze(retryAll),
  });
}
