/**
 * The entry of a local worker thread (see worker-pool.ts). It runs one queue invocation at a time:
 * load the module, check its `queue` handler, build `batch`, `env` and `ctx`, call the handler,
 * wait for `ctx.waitUntil` work and for its own settle/produce calls to be answered, then report
 * how the handler ended. Settlement and producer calls are RPCs to the Host thread, which alone
 * holds the batch credential: it never enters this thread.
 *
 * Worker threads share the process, so this is fault isolation (a throw, hang, `process.exit()`
 * or out-of-memory ends at most this thread), not a security sandbox.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { pathToFileURL } from 'node:url';
import { types } from 'node:util';
import { parentPort } from 'node:worker_threads';
import { NamedError } from '../../delivery/limits.ts';
import type {
  DeliveredMessage,
  HandlerError,
  ProduceCall,
  SettleCall,
} from '../../delivery/settlement-protocol.ts';
import { errorText, handlerError } from '../../worker-runtime/error-report.ts';
import { createInvocationContext } from '../../worker-runtime/invocation-context.ts';
import { createQueueBatch } from '../../worker-runtime/queue-batch.ts';
import { createWorkerEnv } from '../../worker-runtime/worker-env.ts';

/** Host thread → worker thread. */
export type ToThread =
  | {
      type: 'invoke';
      invocation: number;
      file: string;
      vars: Record<string, unknown>;
      producerBindings: string[];
      /** The batch without its credential. */
      batch: { batchId: string; queue: string; messages: DeliveredMessage[] };
    }
  | { type: 'reply'; rpc: number; ok: true; value: unknown }
  | { type: 'reply'; rpc: number; ok: false; error: { name: string; message: string } };

/** Worker thread → Host thread. */
export type FromThread =
  | { type: 'settle'; invocation: number; rpc: number; call: SettleCall }
  | { type: 'produce'; invocation: number; rpc: number; call: ProduceCall }
  | { type: 'done'; invocation: number; outcome: 'returned' | 'threw'; error?: HandlerError }
  /** The module is loaded and the handler is about to run: the invocation's time bound starts. */
  | { type: 'started'; invocation: number };

/** Error names that keep their name when they cross from the Host thread; others arrive as backend_unavailable. */
const KNOWN_NAMES = new Set([
  'unknown_batch',
  'unknown_message',
  'already_settled',
  'backend_unavailable',
  'invalid_body',
  'message_too_large',
  'batch_too_large',
]);

function rebuildError(error: { name: string; message: string }): Error {
  if (error.name === 'TypeError') return new TypeError(error.message);
  if (KNOWN_NAMES.has(error.name)) {
    return new NamedError(error.name as ConstructorParameters<typeof NamedError>[0], error.message);
  }
  return new NamedError('backend_unavailable', 'the Host could not complete the call');
}

function diagnostic(text: string): void {
  process.stderr.write(`${text}\n`);
}

/**
 * Where a module's syntax error is: a dynamic import's SyntaxError carries no file or line, so
 * the module is checked once more by `node --check`, whose report starts with `file:line`, the
 * line and a caret. Only after a failed load; bounded in time and size.
 */
function syntaxErrorLocation(file: string): string | undefined {
  const check = spawnSync(process.execPath, ['--check', file], { encoding: 'utf8', timeout: 5_000 });
  const report = (check.stderr ?? '').split('\n');
  const at = report.findIndex(
    (l) => l.startsWith(`${file}:`) || l.startsWith(`${pathToFileURL(file).href}:`),
  );
  return at < 0
    ? undefined
    : report
        .slice(at, at + 3)
        .join('\n')
        .slice(0, 1_000);
}

// --- module loading -------------------------------------------------------------------------

/** Per file: the digest of the source last imported and its namespace. */
const modules = new Map<string, { digest: string; namespace: Promise<Record<string, unknown>> }>();
let loads = 0;

/**
 * Imports the module, again only when its bytes changed (the URL carries the digest, so the
 * ESM cache holds one instance per version). A failed import is forgotten, and the next attempt
 * uses a fresh URL, so a transient top-level failure is not cached forever.
 */
async function load(file: string): Promise<Record<string, unknown>> {
  const digest = createHash('sha256')
    .update(await readFile(file))
    .digest('hex');
  const cached = modules.get(file);
  if (cached?.digest === digest) return cached.namespace;
  loads += 1;
  const url = `${pathToFileURL(file).href}?v=${digest.slice(0, 16)}-${loads}`;
  const namespace = import(url) as Promise<Record<string, unknown>>;
  const entry = { digest, namespace };
  modules.set(file, entry);
  namespace.catch(() => {
    if (modules.get(file) === entry) modules.delete(file);
  });
  return namespace;
}

/**
 * The `queue` handler if the module declares one (MW-02): `default` is a plain object (prototype
 * `Object.prototype` or `null`; not an array, not a Proxy) with an own *data* property `queue`
 * holding a function. Inherited, accessor-defined and non-function `queue`s are not declared
 * handlers. Nothing of the module runs here: no getter is evaluated and no Proxy trap is reached.
 */
function queueHandler(
  namespace: Record<string, unknown>,
): { self: object; fn: (...args: unknown[]) => unknown } | undefined {
  const exported = namespace.default;
  if (exported === null || typeof exported !== 'object' || types.isProxy(exported)) return undefined;
  if (Array.isArray(exported)) return undefined;
  const proto = Object.getPrototypeOf(exported);
  if (proto !== Object.prototype && proto !== null) return undefined;
  const desc = Object.getOwnPropertyDescriptor(exported, 'queue');
  if (!desc || !('value' in desc) || typeof desc.value !== 'function') return undefined;
  return { self: exported, fn: desc.value };
}

// --- RPC ------------------------------------------------------------------------------------

const port = parentPort;
let nextRpc = 1;
const waiting = new Map<number, { resolve: (value: unknown) => void; reject: (error: Error) => void }>();

function post(message: FromThread): void {
  port!.postMessage(message);
}

/** One invocation's calls to the Host thread: refused once it has ended, awaited before it ends. */
class InvocationLink {
  readonly invocation: number;
  readonly pending = new Set<Promise<unknown>>();
  ended = false;

  constructor(invocation: number) {
    this.invocation = invocation;
  }

  call(type: 'settle', call: SettleCall): Promise<void>;
  call(type: 'produce', call: ProduceCall): Promise<string[]>;
  call(type: 'settle' | 'produce', call: SettleCall | ProduceCall): Promise<unknown> {
    if (this.ended) {
      return Promise.reject(
        type === 'settle'
          ? new NamedError('unknown_batch', 'the batch was finalised when its invocation ended')
          : new NamedError('backend_unavailable', 'the invocation that owned this binding has ended'),
      );
    }
    const rpc = nextRpc++;
    const answer = new Promise<unknown>((resolve, reject) => {
      waiting.set(rpc, { resolve, reject });
      try {
        post({ type, invocation: this.invocation, rpc, call } as FromThread);
      } catch {
        // e.g. a produce field that cannot be cloned (a function as delaySeconds)
        waiting.delete(rpc);
        reject(
          type === 'settle'
            ? new TypeError('the settlement call cannot be sent')
            : new NamedError('invalid_body', 'the message cannot be sent'),
        );
      }
    });
    const tracked = answer.then(
      () => undefined,
      () => undefined,
    );
    this.pending.add(tracked);
    void tracked.then(() => this.pending.delete(tracked));
    return answer;
  }

  /** Waits until no call is in flight, including calls made while waiting. */
  async drain(): Promise<void> {
    while (this.pending.size > 0) await Promise.all([...this.pending]);
  }
}

// --- invocation -----------------------------------------------------------------------------

async function invoke(message: Extract<ToThread, { type: 'invoke' }>): Promise<void> {
  const link = new InvocationLink(message.invocation);
  let outcome: 'returned' | 'threw' = 'threw';
  let error: HandlerError | undefined;
  try {
    const handler = queueHandler(await load(message.file));
    if (!handler) {
      diagnostic(
        'the module does not declare a queue handler (an own function `queue` on a plain default export)',
      );
    } else {
      // The credential stays in the Host thread, whose `settle` is bound to this batch already.
      const batch = createQueueBatch(
        { ...message.batch, credential: '' },
        { settle: (call) => link.call('settle', call) },
      );
      const env = createWorkerEnv({
        vars: message.vars,
        producerBindings: message.producerBindings,
        produce: (call) => link.call('produce', call),
      });
      const context = createInvocationContext();
      post({ type: 'started', invocation: message.invocation });
      try {
        await Reflect.apply(handler.fn, handler.self, [batch, env, context.ctx]);
        outcome = 'returned';
      } catch (err) {
        error = handlerError(err);
        diagnostic(`queue handler failed: ${errorText(err)}`);
      }
      await context.settled();
      context.expire();
      for (const reason of context.rejections)
        diagnostic(`ctx.waitUntil promise rejected: ${errorText(reason)}`);
    }
  } catch (err) {
    const where = err instanceof SyntaxError ? syntaxErrorLocation(message.file) : undefined;
    error = handlerError(err);
    diagnostic(
      `the invocation could not start (module load or env): ${where ? `${where}\n` : ''}${errorText(err)}`,
    );
  }
  await link.drain();
  link.ended = true;
  post({ type: 'done', invocation: message.invocation, outcome, ...(error ? { error } : {}) });
}

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object';
}

if (port) {
  // Like a Workers isolate, an unawaited rejected Promise is reported, not fatal to the thread.
  process.on('unhandledRejection', (reason) => diagnostic(`unhandled rejection: ${errorText(reason)}`));
  port.on('message', (raw: unknown) => {
    if (!isObject(raw)) return;
    const message = raw as ToThread;
    if (message.type === 'invoke') {
      void invoke(message);
    } else if (message.type === 'reply') {
      const entry = waiting.get(message.rpc);
      if (!entry) return;
      waiting.delete(message.rpc);
      if (message.ok) entry.resolve(message.value);
      else entry.reject(rebuildError(message.error));
    }
  });
}
