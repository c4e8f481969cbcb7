import { types } from 'node:util';
import { NamedError } from '../delivery/limits.ts';
import type { ProduceCall } from '../delivery/settlement-protocol.ts';

/** A queue producer binding as worker code sees it (AtLeastOnceQueue 0.2.0): nothing but these two. */
export interface QueueProducerBinding {
  send(body: ArrayBuffer | ArrayBufferView | string, options?: { delaySeconds?: number }): Promise<string>;
  sendBatch(
    messages: readonly { body: ArrayBuffer | ArrayBufferView | string; delaySeconds?: number }[],
  ): Promise<string[]>;
}

/** Carries producer calls to the Host, which validates them and resolves to the new message ids. */
export type ProduceTransport = (call: ProduceCall) => Promise<string[]>;

export interface WorkerEnvInput {
  /** The worker's `vars`: JSON values, given to the handler as they are. */
  vars: Readonly<Record<string, unknown>>;
  /** The worker's secrets, resolved at cold start (worker-secrets.ts): name → string value. */
  secrets?: Readonly<Record<string, string>>;
  /** The producer binding names (`queueProducers` keys). */
  producerBindings: readonly string[];
  produce: ProduceTransport;
}

/**
 * The bytes of a body, copied at call time: an `ArrayBuffer` whole, a view exactly the bytes it
 * views, a string as UTF-8 (lone surrogates become U+FFFD, as `TextEncoder` does). Anything else,
 * including a String object or a detached buffer, is `invalid_body`.
 */
export function bodyBytes(body: unknown): Uint8Array {
  try {
    if (typeof body === 'string') return new TextEncoder().encode(body);
    // `slice()` copies into a new, unshared ArrayBuffer, also for views over a SharedArrayBuffer.
    if (ArrayBuffer.isView(body))
      return new Uint8Array(body.buffer, body.byteOffset, body.byteLength).slice();
    if (types.isArrayBuffer(body)) return new Uint8Array(body).slice();
  } catch {
    // a detached buffer: not a body
  }
  throw new NamedError('invalid_body', 'a body must be an ArrayBuffer, an ArrayBufferView or a string');
}

/** `{body, ...fields}`: the caller's other fields travel as given, for the Host to accept or refuse. */
function message(body: unknown, fields: object | undefined): ProduceCall['messages'][number] {
  const out: Record<string, unknown> = {};
  if (fields !== undefined) {
    for (const [key, value] of Object.entries(fields)) {
      if (key !== 'body')
        Object.defineProperty(out, key, { value, enumerable: true, writable: true, configurable: true });
    }
  }
  out.body = bodyBytes(body);
  return out as unknown as ProduceCall['messages'][number];
}

function isObject(value: unknown): value is object {
  return value !== null && typeof value === 'object';
}

function producerBinding(binding: string, produce: ProduceTransport): QueueProducerBinding {
  const send = async (body: unknown, options?: unknown): Promise<string> => {
    if (options !== undefined && (!isObject(options) || Array.isArray(options))) {
      throw new NamedError('invalid_body', 'options must be omitted or an object');
    }
    const ids = await produce({ binding, messages: [message(body, options)] });
    return ids[0] as string;
  };
  const sendBatch = async (messages: unknown): Promise<string[]> => {
    if (!Array.isArray(messages))
      throw new NamedError('invalid_body', 'sendBatch takes an array of messages');
    const items = Array.from(messages, (item: unknown) => {
      if (!isObject(item) || Array.isArray(item))
        throw new NamedError('invalid_body', 'each message must be an object');
      return message((item as { body?: unknown }).body, item);
    });
    return [...(await produce({ binding, messages: items }))];
  };
  return Object.freeze({
    send: Object.freeze(send),
    sendBatch: Object.freeze(sendBatch),
  }) as QueueProducerBinding;
}

/**
 * The `env` of one invocation (ModuleWorker 0.3.0 §runtime, MW-03): its own enumerable keys are
 * exactly the `vars` keys, the secret names and the producer binding names, nothing else. Var values are the given
 * JSON values; each binding is a frozen object with only `send` and `sendBatch`, which convert
 * bodies to bytes here and leave every other check (sizes, `delaySeconds`, unknown fields, batch
 * length) to the Host's producer core behind `produce`. Fields other than `body` travel verbatim
 * for that reason: `send(b, {delaySeconds: 5, x: 1})` reaches `produce` as
 * `{body, delaySeconds: 5, x: 1}` and the Host refuses it. Only what cannot be represented at all
 * (a non-object `options`, a non-array `sendBatch` argument, a non-object item) is refused here,
 * as `invalid_body`.
 *
 * `env` itself is frozen: it is Host data, built fresh for every invocation. A name that is both
 * a var and a binding (or a binding listed twice) throws, since the Forms reject such a Version
 * before it is stored.
 */
export function createWorkerEnv(input: WorkerEnvInput): Readonly<Record<string, unknown>> {
  const env: Record<string, unknown> = {};
  const define = (key: string, value: unknown): void => {
    // defineProperty, not assignment: a binding named `__proto__` stays an ordinary key.
    Object.defineProperty(env, key, { value, enumerable: true, writable: false, configurable: false });
  };
  for (const [key, value] of Object.entries(input.vars)) define(key, value);
  for (const [name, value] of Object.entries(input.secrets ?? {})) {
    if (Object.hasOwn(env, name)) throw new Error(`env name ${JSON.stringify(name)} is declared twice`);
    define(name, value);
  }
  for (const name of input.producerBindings) {
    if (Object.hasOwn(env, name)) throw new Error(`env name ${JSON.stringify(name)} is declared twice`);
    define(name, producerBinding(name, input.produce));
  }
  return Object.freeze(env);
}
