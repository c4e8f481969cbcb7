import path from 'node:path';
import type { Readable } from 'node:stream';
import { type ResourceLimits, Worker } from 'node:worker_threads';
import { MESSAGE_LIMITS } from '../../delivery/limits.ts';
import type {
  BatchDelivery,
  HandlerError,
  InvocationOutcome,
  ProduceCall,
  SettleCall,
} from '../../delivery/settlement-protocol.ts';
import type { FromThread, ToThread } from './worker-thread-main.ts';

/**
 * The thread entry beside this file: TypeScript in a clone (Node strips the erasable-only types
 * of `.ts` files loaded by worker threads as it does for the Host's own files), JavaScript in the
 * package (`takoform dev`).
 */
const THREAD_ENTRY = new URL(`./worker-thread-main${path.extname(import.meta.url)}`, import.meta.url);

export interface WorkerPoolOptions {
  /** The bound on one invocation, handler plus `ctx.waitUntil` work (`--worker-timeout`). */
  timeoutMs: number;
  /** Threads per module file, i.e. concurrent invocations of one worker (default 8). */
  maxThreadsPerWorker?: number;
  /** V8 limits of each thread; exceeding them ends the thread, not the Host (default 256 MB old space). */
  resourceLimits?: ResourceLimits;
  /** Receives each line threads write to stdout/stderr, prefixed; default the Host's stderr. */
  output?: (line: string) => void;
}

export interface WorkerFileConfig {
  /** `vars` of `<name>.json`: JSON values. */
  vars?: Record<string, unknown>;
  /** `queueProducers` of `<name>.json`: binding name → its queue. Only the names matter here. */
  queueProducers?: Record<string, unknown>;
}

export interface QueueInvocation {
  /** The worker module (`DIR/<space>/<name>.mjs`). Threads are pooled per file. */
  file: string;
  config: WorkerFileConfig;
  delivery: BatchDelivery;
  /** Records one settlement of this batch (bound to its credential); rejects with a named Error. */
  settle: (call: SettleCall) => Promise<void>;
  /** Accepts messages sent through one of this worker's producer bindings; resolves to their ids. */
  produce: (call: ProduceCall) => Promise<string[]>;
  /**
   * Epoch ms after which the invocation must not run (its concurrency slot's deadline): it is cut
   * off then even if `timeoutMs` has not passed, so no handler outlives its slot.
   */
  deadline?: number;
  /** Told the handler's error (name and message) when it threw or could not start. */
  failed?: (error: HandlerError) => void;
  /**
   * When given, a cut-off does not end the thread, as Lambda cannot stop a handler: the
   * invocation ends `abandoned` at once (its Host calls are refused from then on), the thread
   * leaves the pool with its handler still running, and `onCutOff` gets what ends it.
   */
  onCutOff?: (batchId: string, end: () => void) => void;
}

const DEFAULT_MAX_THREADS = 8;
/** Extra time a cold thread may take to load the worker's module before the handler starts. */
const MODULE_LOAD_BOUND_MS = 30_000;
const DEFAULT_RESOURCE_LIMITS: ResourceLimits = { maxOldGenerationSizeMb: 256 };
const MAX_LINE = 16 * 1024;

const SETTLE_ERRORS: Record<string, string> = {
  TypeError: 'invalid settlement arguments',
  unknown_batch: 'the batch is not open for settlement',
  unknown_message: 'the message is not in the batch',
  already_settled: 'the message was settled already',
  backend_unavailable: 'the settlement could not be recorded',
};
const PRODUCE_ERRORS: Record<string, string> = {
  invalid_body: 'the message is not acceptable',
  message_too_large: 'a message body is larger than 127000 bytes',
  batch_too_large: 'too many messages in one batch',
  backend_unavailable: 'the messages could not be accepted',
};

/**
 * A Host-side rejection as worker code may see it: a known name with a fixed, secret-free
 * message. Any other failure of the Host's callback is `backend_unavailable` (DL-08).
 */
function toWire(err: unknown, table: Record<string, string>): { name: string; message: string } {
  const given = err instanceof Error ? err.name : typeof err === 'string' ? err : '';
  const name = Object.hasOwn(table, given) ? given : 'backend_unavailable';
  return { name, message: table[name]! };
}

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

function hasOnlyKeys(value: Record<string, unknown>, keys: readonly string[]): boolean {
  return Object.keys(value).every((k) => keys.includes(k));
}

function isDelay(value: unknown): value is number | undefined {
  return (
    value === undefined ||
    (typeof value === 'number' &&
      Number.isInteger(value) &&
      value >= 0 &&
      value <= MESSAGE_LIMITS.maxDelaySeconds)
  );
}

/**
 * A settle call as the thread sent it, rebuilt field by field, or undefined when it is not one a
 * batch object could have made (worker code can post to the Host thread directly).
 */
function settleCall(call: unknown, messageCount: number): SettleCall | undefined {
  if (!isObject(call)) return undefined;
  const index = call.index;
  const validIndex =
    typeof index === 'number' && Number.isInteger(index) && index >= 0 && index < messageCount;
  const delay = call.delaySeconds;
  switch (call.kind) {
    case 'ack':
      return validIndex && hasOnlyKeys(call, ['kind', 'index'])
        ? { kind: 'ack', index: index as number }
        : undefined;
    case 'retry':
      if (!validIndex || !isDelay(delay) || !hasOnlyKeys(call, ['kind', 'index', 'delaySeconds']))
        return undefined;
      return delay === undefined
        ? { kind: 'retry', index: index as number }
        : { kind: 'retry', index: index as number, delaySeconds: delay };
    case 'ackAll':
      return hasOnlyKeys(call, ['kind']) ? { kind: 'ackAll' } : undefined;
    case 'retryAll':
      if (!isDelay(delay) || !hasOnlyKeys(call, ['kind', 'delaySeconds'])) return undefined;
      return delay === undefined ? { kind: 'retryAll' } : { kind: 'retryAll', delaySeconds: delay };
    default:
      return undefined;
  }
}

/** Name and code of what ended a thread, never its message (which worker code wrote). */
function describeFailure(err: unknown): string {
  if (!(err instanceof Error)) return err === null ? 'null' : typeof err;
  const code = (err as { code?: unknown }).code;
  return typeof code === 'string' ? `${err.name} (${code})` : err.name;
}

/** `space/name` of `DIR/<space>/<name>.mjs`, for output prefixes. */
function workerLabel(file: string): string {
  return `${path.basename(path.dirname(file))}/${path.basename(file).replace(/\.m?js$/, '')}`;
}

/** Forwards a thread's output line by line (long lines in pieces), each prefixed. */
function pipeLines(stream: Readable, prefix: string, sink: (line: string) => void): void {
  let buffered = '';
  stream.setEncoding('utf8');
  stream.on('data', (chunk: string) => {
    buffered += chunk;
    for (let nl = buffered.indexOf('\n'); nl >= 0; nl = buffered.indexOf('\n')) {
      sink(`${prefix}${buffered.slice(0, nl)}`);
      buffered = buffered.slice(nl + 1);
    }
    while (buffered.length > MAX_LINE) {
      sink(`${prefix}${buffered.slice(0, MAX_LINE)}`);
      buffered = buffered.slice(MAX_LINE);
    }
  });
  stream.on('end', () => {
    if (buffered) sink(`${prefix}${buffered}`);
    buffered = '';
  });
}

/** A thread's report of a handler error, checked: the thread runs the worker's code. */
function handlerErrorOf(raw: unknown): HandlerError | undefined {
  if (!isObject(raw)) return undefined;
  const { name, message } = raw as { name?: unknown; message?: unknown };
  if (typeof name !== 'string' || typeof message !== 'string') return undefined;
  return { name: name.slice(0, 128), message: message.slice(0, 300) };
}

/** One invocation in progress on a thread, as the Host thread tracks it. */
interface Running {
  readonly invocation: number;
  readonly messageCount: number;
  readonly producerBindings: ReadonlySet<string>;
  readonly settle: QueueInvocation['settle'];
  readonly produce: QueueInvocation['produce'];
  /** Host callbacks started for this invocation and not finished yet. */
  readonly hostCalls: Set<Promise<void>>;
  /** False once the invocation ended for any reason: no further call reaches the Host. */
  open: boolean;
  end(outcome: InvocationOutcome, error?: HandlerError): void;
  /** The handler started: from now on the invocation's own time bound applies. */
  started(): void;
}

class PooledThread {
  readonly worker: Worker;
  running: Running | undefined;
  /** Handed out by the pool and not yet given back. */
  leased = false;
  dead = false;
  /** Cut off and left running (`onCutOff`): never handed out again. */
  held = false;
  private readonly label: string;

  constructor(
    file: string,
    options: Required<Omit<WorkerPoolOptions, 'maxThreadsPerWorker'>>,
    onDeath: () => void,
  ) {
    this.label = workerLabel(file);
    this.worker = new Worker(THREAD_ENTRY, {
      stdout: true,
      stderr: true,
      // Worker code does not see the Host's environment (API keys, AWS credentials) as process.env.
      env: {},
      resourceLimits: options.resourceLimits,
    });
    // Idle threads never keep the Host alive; a running invocation's timeout timer does.
    this.worker.unref();
    const prefix = `[worker ${this.label}] `;
    pipeLines(this.worker.stdout, prefix, options.output);
    pipeLines(this.worker.stderr, prefix, options.output);
    this.worker.on('message', (message: unknown) => this.onMessage(message));
    this.worker.on('error', (err: unknown) => {
      // Whatever worker code threw: possibly not an Error at all (`throw undefined`).
      options.output(`${prefix}thread failed: ${describeFailure(err)}`);
      this.die();
      onDeath();
    });
    this.worker.on('exit', () => {
      this.die();
      onDeath();
    });
  }

  send(message: ToThread, transfer: ArrayBuffer[] = []): void {
    if (!this.dead) this.worker.postMessage(message, transfer);
  }

  /** Ends the thread (a hung loop included) and, with it, every call it could still make. */
  kill(): void {
    this.die();
    // Rejects only for a thread that is gone already: what kill wants.
    this.worker.terminate().catch(() => undefined);
  }

  private die(): void {
    if (this.dead) return;
    this.dead = true;
    this.running?.end('abandoned');
  }

  private reply(
    rpc: number,
    result: { ok: true; value: unknown } | { ok: false; error: { name: string; message: string } },
  ): void {
    this.send({ type: 'reply', rpc, ...result } as ToThread);
  }

  private onMessage(raw: unknown): void {
    if (!isObject(raw) || typeof raw.invocation !== 'number') return;
    const message = raw as FromThread;
    const running =
      this.running?.open && this.running.invocation === message.invocation ? this.running : undefined;
    if (message.type === 'done') {
      if (running && (message.outcome === 'returned' || message.outcome === 'threw'))
        running.end(message.outcome, handlerErrorOf(message.error));
      return;
    }
    if (message.type === 'started') {
      running?.started();
      return;
    }
    if (message.type !== 'settle' && message.type !== 'produce') return;
    const rpc = message.rpc;
    if (typeof rpc !== 'number') return;
    if (!running) {
      // The invocation ended: its batch is finalised and its bindings are gone.
      this.reply(rpc, {
        ok: false,
        error:
          message.type === 'settle'
            ? toWire('unknown_batch', SETTLE_ERRORS)
            : toWire('backend_unavailable', PRODUCE_ERRORS),
      });
      return;
    }
    let work: Promise<unknown>;
    let errors: Record<string, string>;
    if (message.type === 'settle') {
      errors = SETTLE_ERRORS;
      const call = settleCall(message.call, running.messageCount);
      work = call ? Promise.resolve().then(() => running.settle(call)) : Promise.reject(new TypeError());
    } else {
      errors = PRODUCE_ERRORS;
      const call = message.call as unknown;
      const valid =
        isObject(call) &&
        typeof call.binding === 'string' &&
        running.producerBindings.has(call.binding) &&
        Array.isArray(call.messages) &&
        call.messages.every((m: unknown) => isObject(m) && m.body instanceof Uint8Array);
      work = valid
        ? Promise.resolve().then(() => running.produce(call as unknown as ProduceCall))
        : Promise.reject('invalid_body');
    }
    const done = work.then(
      (value) => this.reply(rpc, { ok: true, value: message.type === 'settle' ? undefined : value }),
      (err: unknown) => this.reply(rpc, { ok: false, error: toWire(err, errors) }),
    );
    running.hostCalls.add(done);
    void done.then(() => running.hostCalls.delete(done));
  }
}

class FilePool {
  readonly threads: PooledThread[] = [];
  readonly waiters: ((thread: PooledThread | undefined) => void)[] = [];
}

/**
 * Runs queue invocations of local worker modules in `node:worker_threads` (host-profile §2), so
 * that a handler that throws, hangs (a synchronous loop included), exits the thread or runs out
 * of memory ends as an `abandoned` invocation and never stops or blocks the Host's thread.
 *
 * Threads are pooled per module file: one invocation per thread at a time, at most
 * `maxThreadsPerWorker` threads per file; further invocations wait for a free thread (the timeout
 * counts from when one starts running). A thread that died or was cut off is replaced on demand.
 * Like an isolate, a thread keeps its module instance and global state between invocations (a
 * changed file is imported anew); nothing is shared between threads or files.
 *
 * `config` is read per invocation. The batch credential never leaves the Host thread: the
 * `settle` callback is expected to be bound to it already.
 */
export class WorkerPool {
  /**
   * An invocation answered `abandoned` has its thread killed first: its handler runs no more, so
   * its batch's slot may be freed at once (on Lambda a cut-off handler runs on until its
   * process exits, and the slot waits for its deadline).
   */
  readonly stopsAbandonedHandlers: boolean = true;
  private readonly options: Required<Omit<WorkerPoolOptions, 'maxThreadsPerWorker'>>;
  private readonly maxThreads: number;
  private readonly files = new Map<string, FilePool>();
  /** Cut-off threads left running (`onCutOff`), ended by their holder or by `close`. */
  private readonly held = new Set<PooledThread>();
  private nextInvocation = 1;
  private closed = false;

  constructor(options: WorkerPoolOptions) {
    if (!Number.isFinite(options.timeoutMs) || options.timeoutMs <= 0)
      throw new RangeError('timeoutMs must be > 0');
    this.maxThreads = options.maxThreadsPerWorker ?? DEFAULT_MAX_THREADS;
    if (!Number.isInteger(this.maxThreads) || this.maxThreads < 1) {
      throw new RangeError('maxThreadsPerWorker must be a positive integer');
    }
    this.options = {
      timeoutMs: options.timeoutMs,
      resourceLimits: options.resourceLimits ?? DEFAULT_RESOURCE_LIMITS,
      output: options.output ?? ((line) => process.stderr.write(`${line}\n`)),
    };
  }

  /**
   * Runs `queue(batch, env, ctx)` of `file` for one delivery. Resolves (never rejects, unless the
   * pool is closed) to how it ended: `returned` or `threw` as the handler did (a module without a
   * declared `queue` handler counts as `threw`, and nothing of it is called), or `abandoned` when
   * it exceeded `timeoutMs` or its thread died. By then every settle/produce call of the
   * invocation that reached the Host has finished, and no further one can arrive.
   */
  async invokeQueue(input: QueueInvocation): Promise<InvocationOutcome> {
    if (this.closed) throw new Error('the worker pool is closed');
    const file = path.resolve(input.file);
    const vars = input.config.vars ?? {};
    const producerBindings = Object.keys(input.config.queueProducers ?? {});
    const thread = await this.acquire(file);
    if (!thread) return 'abandoned';
    const invocation = this.nextInvocation++;
    const { batchId, queue, messages } = input.delivery;
    try {
      return await new Promise<InvocationOutcome>((resolve) => {
        const running: Running = {
          invocation,
          messageCount: messages.length,
          producerBindings: new Set(producerBindings),
          settle: input.settle,
          produce: input.produce,
          hostCalls: new Set(),
          open: true,
          end: (outcome, error) => {
            if (!running.open) return;
            running.open = false;
            if (error) input.failed?.(error);
            clearTimeout(timer);
            if (thread.running === running) thread.running = undefined;
            void Promise.allSettled([...running.hostCalls]).then(() => resolve(outcome));
          },
          started: () => {
            if (!running.open) return;
            clearTimeout(timer);
            timer = cutOffAfter(this.options.timeoutMs);
          },
        };
        const cutOffAfter = (ms: number) => {
          const bounded =
            input.deadline === undefined ? ms : Math.min(ms, Math.max(0, input.deadline - Date.now()));
          return setTimeout(() => {
            this.options.output(`[worker ${workerLabel(file)}] invocation cut off after ${bounded} ms`);
            if (input.onCutOff && !thread.dead) this.hold(file, thread, running, input.onCutOff, batchId);
            else thread.kill(); // ends `running` as abandoned
          }, bounded);
        };
        // Loading the module (a cold thread, a slow machine) does not eat into the handler's
        // time; it has its own, more generous bound, so a module that never loads is cut off too.
        let timer = cutOffAfter(this.options.timeoutMs + MODULE_LOAD_BOUND_MS);
        thread.running = running;
        // Each body is copied into a buffer of its own exact size and moved (not cloned) to the
        // thread: cloning a view would carry its whole backing buffer (a pooled Buffer slab holds
        // other data) into a thread whose code can read every message it receives.
        const copies = messages.map((m) => ({
          id: m.id,
          timestampMillis: m.timestampMillis,
          body: new Uint8Array(m.body),
          attempts: m.attempts,
        }));
        try {
          thread.send(
            {
              type: 'invoke',
              invocation,
              file,
              vars,
              producerBindings,
              batch: { batchId, queue, messages: copies },
            },
            copies.map((m) => m.body.buffer),
          );
        } catch {
          // `vars` that cannot be cloned: the invocation cannot start.
          running.end('threw');
        }
        if (thread.dead) running.end('abandoned');
      });
    } finally {
      this.release(file, thread);
    }
  }

  /** Takes a cut-off thread out of the pool, its handler still running, until `onCutOff`'s end. */
  private hold(
    file: string,
    thread: PooledThread,
    running: Running,
    onCutOff: NonNullable<QueueInvocation['onCutOff']>,
    batchId: string,
  ): void {
    thread.held = true;
    this.forget(file, thread);
    this.held.add(thread);
    running.end('abandoned');
    onCutOff(batchId, () => {
      this.held.delete(thread);
      thread.kill();
    });
  }

  /** Ends every thread; invocations still running or waiting end as `abandoned`. */
  async close(): Promise<void> {
    this.closed = true;
    const threads: PooledThread[] = [...this.held];
    this.held.clear();
    for (const pool of this.files.values()) {
      for (const waiter of pool.waiters.splice(0)) waiter(undefined);
      threads.push(...pool.threads.splice(0));
    }
    this.files.clear();
    await Promise.all(
      threads.map(async (t) => {
        t.kill();
        // Rejects only for a thread that is gone already.
        await t.worker.terminate().catch(() => undefined);
      }),
    );
  }

  private filePool(file: string): FilePool {
    let pool = this.files.get(file);
    if (!pool) {
      pool = new FilePool();
      this.files.set(file, pool);
    }
    return pool;
  }

  private acquire(file: string): Promise<PooledThread | undefined> {
    const pool = this.filePool(file);
    const idle = pool.threads.find((t) => !t.dead && !t.leased);
    if (idle) {
      idle.leased = true;
      return Promise.resolve(idle);
    }
    if (pool.threads.length < this.maxThreads) return Promise.resolve(this.spawn(file, pool));
    return new Promise((resolve) => pool.waiters.push(resolve));
  }

  private spawn(file: string, pool: FilePool): PooledThread {
    const thread = new PooledThread(file, this.options, () => this.forget(file, thread));
    thread.leased = true;
    pool.threads.push(thread);
    return thread;
  }

  /** Gives a thread back: to the next waiting invocation (a dead one replaced first), else idle. */
  private release(file: string, thread: PooledThread): void {
    thread.leased = false;
    const pool = this.files.get(file);
    if (!pool) return;
    if (thread.dead) this.forget(file, thread);
    const waiter = pool.waiters.shift();
    if (!waiter) return;
    if (thread.dead || thread.held) {
      waiter(this.spawn(file, pool));
    } else {
      thread.leased = true;
      waiter(thread);
    }
  }

  /** Drops a dead thread, so that a new one can take its place. */
  private forget(file: string, thread: PooledThread): void {
    const pool = this.files.get(file);
    if (!pool) return;
    const i = pool.threads.indexOf(thread);
    if (i >= 0) pool.threads.splice(i, 1);
  }
}
