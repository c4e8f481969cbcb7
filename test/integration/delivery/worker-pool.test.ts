import { existsSync, readFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { NamedError } from '../../../lambdas/delivery/limits.ts';
import type {
  BatchDelivery,
  InvocationOutcome,
  ProduceCall,
  SettleCall,
} from '../../../lambdas/delivery/settlement-protocol.ts';
import {
  type QueueInvocation,
  WorkerPool,
  type WorkerPoolOptions,
} from '../../../lambdas/local/workers/worker-pool.ts';

/**
 * The local worker pool with real `.mjs` modules in real threads (MW-02, MW-03, DL-09 and
 * host-profile §2: a worker that throws, hangs or crashes cannot stop the Host).
 */

const CREDENTIAL = 'cred-0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a';
const TIMEOUT_MS = 500;

let dir: string;
let counter = 0;
const pools: WorkerPool[] = [];

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'worker-pool-test-'));
  await mkdir(path.join(dir, 'default'));
});
afterEach(async () => {
  await Promise.all(pools.splice(0).map((p) => p.close()));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Writes `DIR/default/<name>.mjs` and returns its path. */
async function moduleFile(source: string, name = `w${++counter}`): Promise<string> {
  const file = path.join(dir, 'default', `${name}.mjs`);
  await writeFile(file, source);
  return file;
}

function markerPath(): string {
  return path.join(dir, `marker-${++counter}`);
}

function newPool(options: Partial<WorkerPoolOptions> = {}): { pool: WorkerPool; output: string[] } {
  const output: string[] = [];
  const pool = new WorkerPool({ timeoutMs: TIMEOUT_MS, output: (line) => output.push(line), ...options });
  pools.push(pool);
  return { pool, output };
}

function delivery(count = 3, batchId = `batch-${++counter}`): BatchDelivery {
  return {
    batchId,
    credential: CREDENTIAL,
    queue: 'orders',
    messages: Array.from({ length: count }, (_, i) => ({
      id: `${batchId}-m${i}`,
      timestampMillis: 1_700_000_000_000 + i,
      body: new Uint8Array([i, 255 - i, 0]),
      attempts: i + 1,
    })),
  };
}

const decode = (bytes: Uint8Array): string => new TextDecoder().decode(bytes);

interface Recorded {
  settles: SettleCall[];
  produced: ProduceCall[];
  /** The bodies sent, as text. */
  sent: string[];
  events: string[];
}

/** Runs one invocation with recording callbacks; `settle`/`produce` can be overridden. */
async function invoke(
  pool: WorkerPool,
  file: string,
  overrides: Partial<Omit<QueueInvocation, 'file'>> = {},
): Promise<{ outcome: InvocationOutcome; ms: number } & Recorded> {
  const recorded: Recorded = { settles: [], produced: [], sent: [], events: [] };
  let ids = 0;
  const started = performance.now();
  const outcome = await pool.invokeQueue({
    file,
    config: { vars: {}, queueProducers: { OUT: { queue: 'out' } } },
    delivery: delivery(),
    settle: async (call) => {
      recorded.settles.push(call);
      recorded.events.push(`settle:${call.kind}`);
    },
    produce: async (call) => {
      recorded.produced.push(call);
      for (const m of call.messages) recorded.sent.push(decode(m.body));
      return call.messages.map(() => `msg-${++ids}`);
    },
    ...overrides,
  });
  recorded.events.push(`outcome:${outcome}`);
  return { outcome, ms: performance.now() - started, ...recorded };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('WorkerPool: outcomes (MW-03, DL-05 inputs)', () => {
  it('returned, with the acknowledgement delivered by index', async () => {
    const { pool } = newPool();
    const file = await moduleFile(`
      export default {
        async queue(batch) {
          await batch.acknowledge(batch.messages[1].id);
        },
      };`);
    const r = await invoke(pool, file);
    expect(r.outcome).toBe('returned');
    expect(r.settles).toEqual([{ kind: 'ack', index: 1 }]);
  });

  it('returned for a synchronous handler returning a non-Promise value', async () => {
    const { pool } = newPool();
    const file = await moduleFile(`export default { queue() { return 42; } };`);
    expect((await invoke(pool, file)).outcome).toBe('returned');
  });

  it('threw when the handler throws synchronously', async () => {
    const { pool, output } = newPool();
    const file = await moduleFile(
      `export default { queue() { throw new Error('sync failure ${CREDENTIAL}'); } };`,
    );
    const r = await invoke(pool, file);
    expect(r.outcome).toBe('threw');
    expect(r.settles).toEqual([]);
    // The worker's own log gets the message and the stack (the batch credential never reaches
    // the thread; this one is only the text the worker threw).
    await vi.waitFor(() =>
      expect(output.join('\n')).toContain(`queue handler failed: Error: sync failure ${CREDENTIAL}`),
    );
    expect(output.join('\n')).toMatch(
      new RegExp(`\\] +at (Object\\.)?queue \\(.*${path.basename(file)}(\\?[^:]*)?:1:`),
    );
  });

  it('a module with a syntax error: threw, and its log names the error, the file and the line', async () => {
    const { pool, output } = newPool();
    const file = await moduleFile('export default {\n  async queue(batch) {\n    const = 1;\n  },\n};\n');
    expect((await invoke(pool, file)).outcome).toBe('threw');
    await vi.waitFor(() => expect(output.join('\n')).toContain('the invocation could not start'));
    const text = output.join('\n');
    expect(text).toContain('SyntaxError');
    expect(text).toContain(`${path.basename(file)}:3`);
  });

  it('threw when the handler returns a rejected Promise, with settlements made before it standing', async () => {
    const { pool } = newPool();
    const file = await moduleFile(`
      export default {
        async queue(batch) {
          await batch.retry(batch.messages[2].id, 60);
          throw new TypeError('async failure');
        },
      };`);
    const r = await invoke(pool, file);
    expect(r.outcome).toBe('threw');
    expect(r.settles).toEqual([{ kind: 'retry', index: 2, delaySeconds: 60 }]);
  });

  it('threw when the module fails to import', async () => {
    const { pool } = newPool();
    expect((await invoke(pool, await moduleFile(`export default {`))).outcome).toBe('threw');
    expect((await invoke(pool, await moduleFile(`throw new Error('top level');`))).outcome).toBe('threw');
  });

  it('runs every settlement method and settles ids by their index', async () => {
    const { pool } = newPool();
    const file = await moduleFile(`
      export default {
        async queue(batch) {
          const [a, b, c] = batch.messages;
          await batch.acknowledge(c.id);
          await batch.retry(a.id);
          await batch.retry(b.id, 0);
          await batch.acknowledgeAll();
          await batch.retryAll(43200);
          await batch.retryAll();
        },
      };`);
    const r = await invoke(pool, file);
    expect(r.outcome).toBe('returned');
    expect(r.settles).toEqual([
      { kind: 'ack', index: 2 },
      { kind: 'retry', index: 0 },
      { kind: 'retry', index: 1, delaySeconds: 0 },
      { kind: 'ackAll' },
      { kind: 'retryAll', delaySeconds: 43200 },
      { kind: 'retryAll' },
    ]);
  });
});

describe('WorkerPool: settlement errors inside the handler', () => {
  const reporter = `
    const report = async (env, p) => {
      try { await p; await env.OUT.send('resolved'); }
      catch (e) { await env.OUT.send(e.name + '|' + (e instanceof Error) + '|' + e.message); }
    };`;

  it.each(['already_settled', 'unknown_batch', 'backend_unavailable'] as const)(
    'a settle answered with %s surfaces in the handler with that name',
    async (name) => {
      const { pool } = newPool();
      const file = await moduleFile(`${reporter}
        export default { async queue(batch, env) { await report(env, batch.acknowledge(batch.messages[0].id)); } };`);
      const r = await invoke(pool, file, {
        settle: async () => {
          throw new NamedError(name, 'Host detail that stays in the Host');
        },
      });
      expect(r.outcome).toBe('returned');
      expect(r.sent).toHaveLength(1);
      const [gotName, isError, message] = r.sent[0]!.split('|');
      expect(gotName).toBe(name);
      expect(isError).toBe('true');
      expect(message).not.toContain('Host detail');
    },
  );

  it('any other Host failure surfaces as backend_unavailable without its message', async () => {
    const { pool } = newPool();
    const file = await moduleFile(`${reporter}
      export default { async queue(batch, env) { await report(env, batch.acknowledgeAll()); } };`);
    const r = await invoke(pool, file, {
      settle: async () => {
        throw new Error(`connection to ${CREDENTIAL} refused`);
      },
    });
    expect(r.sent).toHaveLength(1);
    expect(r.sent[0]!.startsWith('backend_unavailable|true|')).toBe(true);
    expect(r.sent[0]).not.toContain(CREDENTIAL);
  });

  it('argument errors reject TypeError and foreign ids unknown_message, inside the thread', async () => {
    const { pool } = newPool();
    const file = await moduleFile(`${reporter}
      export default {
        async queue(batch, env) {
          await report(env, batch.acknowledge(7));
          await report(env, batch.retry(batch.messages[0].id, 1.5));
          await report(env, batch.retryAll(43201));
          await report(env, batch.acknowledge('not-in-this-batch'));
        },
      };`);
    const r = await invoke(pool, file);
    expect(r.sent.map((s) => s.split('|')[0])).toEqual([
      'TypeError',
      'TypeError',
      'TypeError',
      'unknown_message',
    ]);
    expect(r.settles).toEqual([]);
  });
});

describe('WorkerPool: cut-offs and crashes (host-profile §2)', () => {
  it('abandons a handler that never resolves after the timeout, and the pool keeps working', async () => {
    const { pool } = newPool({ maxThreadsPerWorker: 1 });
    const file = await moduleFile(`
      let invocations = 0;
      export default {
        async queue(batch, env) {
          invocations += 1;
          await env.OUT.send(String(invocations));
          if (env.MODE === 'hang') return new Promise(() => {});
        },
      };`);
    const hung = await invoke(pool, file, {
      config: { vars: { MODE: 'hang' }, queueProducers: { OUT: {} } },
    });
    expect(hung.outcome).toBe('abandoned');
    expect(hung.ms).toBeGreaterThanOrEqual(TIMEOUT_MS - 5);
    expect(hung.ms).toBeLessThan(TIMEOUT_MS + 3000);
    expect(hung.sent).toEqual(['1']);
    const next = await invoke(pool, file, { config: { vars: { MODE: 'ok' }, queueProducers: { OUT: {} } } });
    expect(next.outcome).toBe('returned');
    // A fresh thread: the cut-off thread's module state is gone with it.
    expect(next.sent).toEqual(['1']);
  });

  it('cuts off a synchronous endless loop while the Host thread keeps running', async () => {
    const { pool } = newPool();
    const file = await moduleFile(`
      export default {
        async queue(batch) {
          await batch.acknowledge(batch.messages[0].id);
          while (true) {}
        },
      };`);
    let ticks = 0;
    const interval = setInterval(() => ticks++, 10);
    try {
      const r = await invoke(pool, file);
      expect(r.outcome).toBe('abandoned');
      expect(r.settles).toEqual([{ kind: 'ack', index: 0 }]);
      // ~50 ticks fit in the timeout; a blocked Host thread would have made none.
      expect(ticks).toBeGreaterThanOrEqual(15);
    } finally {
      clearInterval(interval);
    }
    expect((await invoke(pool, await moduleFile(`export default { queue() {} };`))).outcome).toBe('returned');
  });

  it('after a cut-off, no settle call of that invocation reaches the Host any more', async () => {
    const { pool } = newPool();
    const file = await moduleFile(`
      export default {
        queue(batch, env, ctx) {
          ctx.waitUntil(new Promise(() => {
            setInterval(() => { batch.acknowledgeAll().catch(() => {}); env.OUT.send('x').catch(() => {}); }, 10);
          }));
        },
      };`);
    const r = await invoke(pool, file);
    expect(r.outcome).toBe('abandoned');
    expect(r.settles.length).toBeGreaterThan(5);
    const settles = r.settles.length;
    const produced = r.produced.length;
    await sleep(200);
    expect(r.settles.length).toBe(settles);
    expect(r.produced.length).toBe(produced);
  });

  it('DL-02 with onCutOff a cut-off handler runs on outside the pool, as on Lambda, until its end is called', async () => {
    const { pool } = newPool({ maxThreadsPerWorker: 1 });
    const marker = markerPath();
    const file = await moduleFile(`
      import { appendFileSync } from 'node:fs';
      export default {
        async queue(batch) {
          for (;;) {
            appendFileSync(${JSON.stringify(marker)}, 'x');
            await batch.acknowledge(batch.messages[0].id).catch((e) => appendFileSync(${JSON.stringify(marker)}, e.name[0]));
            await new Promise((r) => setTimeout(r, 20));
          }
        },
      };`);
    const size = () => (existsSync(marker) ? readFileSync(marker, 'utf8') : '');
    const held: { batchId: string; end: () => void }[] = [];
    const cut = await invoke(pool, file, { onCutOff: (batchId, end) => held.push({ batchId, end }) });
    expect(cut.outcome).toBe('abandoned');
    expect(held).toHaveLength(1);
    // Still running: it goes on writing, and its settle calls no longer reach the Host.
    const settles = cut.settles.length;
    const before = size().length;
    await sleep(200);
    expect(size().length).toBeGreaterThan(before);
    expect(size()).toContain('u'); // unknown_batch
    expect(cut.settles.length).toBe(settles);
    // The held thread is not the pool's any more: the next invocation gets a thread of its own.
    expect((await invoke(pool, await moduleFile(`export default { queue() {} };`))).outcome).toBe('returned');
    held[0]?.end();
    await sleep(100);
    const after = size().length;
    await sleep(200);
    expect(size().length).toBe(after);
  });

  it('abandons an invocation whose thread calls process.exit(3); the Host lives on', async () => {
    const { pool } = newPool({ timeoutMs: 10_000 });
    const file = await moduleFile(`export default { queue() { process.exit(3); } };`);
    const r = await invoke(pool, file);
    expect(r.outcome).toBe('abandoned');
    expect(r.ms).toBeLessThan(5_000);
    expect(process.exitCode ?? 0).toBe(0);
    const ok = await moduleFile(`export default { queue() {} };`);
    expect((await invoke(pool, ok)).outcome).toBe('returned');
    expect((await invoke(pool, file)).outcome).toBe('abandoned');
  });

  it('abandons an invocation whose thread dies of an uncaught exception in a timer', async () => {
    const { pool, output } = newPool({ timeoutMs: 10_000 });
    const file = await moduleFile(`
      export default {
        queue() {
          setTimeout(() => { throw new Error('from a timer'); }, 10);
          return new Promise(() => {});
        },
      };`);
    const r = await invoke(pool, file);
    expect(r.outcome).toBe('abandoned');
    expect(r.ms).toBeLessThan(5_000);
    expect(output.join('\n')).toContain('thread failed: Error');
  });

  it.each(['undefined', 'null', "'a string'", '{ name: 1 }', 'Object.create(null)'])(
    'abandons an invocation whose thread dies of a timer throwing %s, and the Host keeps going',
    async (value) => {
      const { pool } = newPool({ timeoutMs: 10_000 });
      const file = await moduleFile(`
        export default { queue() { setTimeout(() => { throw ${value}; }, 10); return new Promise(() => {}); } };`);
      const r = await invoke(pool, file);
      expect(r.outcome).toBe('abandoned');
      expect(r.ms).toBeLessThan(5_000);
    },
  );

  it('abandons an invocation whose thread runs out of memory', async () => {
    const { pool, output } = newPool({ timeoutMs: 20_000, resourceLimits: { maxOldGenerationSizeMb: 16 } });
    const file = await moduleFile(`
      export default {
        queue() {
          const hoard = [];
          for (;;) hoard.push(new Array(100000).fill({ a: Math.random() }));
        },
      };`);
    const r = await invoke(pool, file);
    expect(r.outcome).toBe('abandoned');
    expect(output.join('\n')).toContain('ERR_WORKER_OUT_OF_MEMORY');
    expect((await invoke(pool, await moduleFile(`export default { queue() {} };`))).outcome).toBe('returned');
  });

  it('keeps an unawaited rejected settlement from killing the thread', async () => {
    const { pool, output } = newPool({ maxThreadsPerWorker: 1 });
    const file = await moduleFile(`
      let n = 0;
      export default { async queue(batch, env) { n += 1; batch.acknowledge('nope'); await env.OUT.send(String(n)); } };`);
    const r = await invoke(pool, file);
    expect(r.outcome).toBe('returned');
    await vi.waitFor(() => expect(output.join('\n')).toContain('unhandled rejection: unknown_message'));
    // The same thread (its module state) serves the next invocation.
    expect((await invoke(pool, file)).sent).toEqual(['2']);
  });
});

describe('WorkerPool: ctx.waitUntil (MW-03)', () => {
  it('keeps the invocation alive until its promise settles; a settlement made in it lands first', async () => {
    const { pool } = newPool({ timeoutMs: 5_000 });
    const file = await moduleFile(`
      export default {
        queue(batch, env, ctx) {
          ctx.waitUntil(new Promise((r) => setTimeout(r, 300)).then(() => batch.acknowledge(batch.messages[2].id)));
        },
      };`);
    const events: string[] = [];
    const r = await invoke(pool, file, {
      settle: async (call) => {
        await sleep(100); // a slow durable write: the outcome still waits for it
        events.push(`settle:${JSON.stringify(call)}`);
      },
    });
    events.push(`outcome:${r.outcome}`);
    expect(r.outcome).toBe('returned');
    expect(r.ms).toBeGreaterThanOrEqual(390);
    expect(events).toEqual(['settle:{"kind":"ack","index":2}', 'outcome:returned']);
  });

  it('keeps a throwing handler alive for its waitUntil work too, and records a rejected one', async () => {
    const { pool, output } = newPool({ timeoutMs: 5_000 });
    const file = await moduleFile(`
      export default {
        queue(batch, env, ctx) {
          ctx.waitUntil(new Promise((r) => setTimeout(r, 200)).then(() => env.OUT.send('late work done')));
          ctx.waitUntil(Promise.reject(new RangeError('diagnostics only')));
          throw new Error('handler failed');
        },
      };`);
    const r = await invoke(pool, file);
    expect(r.outcome).toBe('threw');
    expect(r.sent).toEqual(['late work done']);
    await vi.waitFor(() => expect(output.join('\n')).toContain('ctx.waitUntil promise rejected: RangeError'));
  });

  it('counts waitUntil work against the timeout', async () => {
    const { pool } = newPool();
    const file = await moduleFile(
      `export default { queue(b, e, ctx) { ctx.waitUntil(new Promise(() => {})); } };`,
    );
    expect((await invoke(pool, file)).outcome).toBe('abandoned');
  });

  it('after the end: waitUntil throws context_expired, the old batch rejects unknown_batch, the old binding refuses', async () => {
    const { pool } = newPool({ maxThreadsPerWorker: 1 });
    const file = await moduleFile(`
      let saved;
      export default {
        async queue(batch, env, ctx) {
          if (!saved) { saved = { batch, env, ctx }; return; }
          const names = [];
          try { saved.ctx.waitUntil(Promise.resolve()); names.push('no error'); }
          catch (e) { names.push('sync:' + e.name); }
          try { await saved.batch.acknowledge(saved.batch.messages[0].id); names.push('resolved'); }
          catch (e) { names.push(e.name); }
          try { await saved.batch.retryAll(); names.push('resolved'); }
          catch (e) { names.push(e.name); }
          try { await saved.env.OUT.send('late'); names.push('resolved'); }
          catch (e) { names.push(e.name); }
          await env.OUT.send(names.join(','));
        },
      };`);
    const first = await invoke(pool, file);
    expect(first.outcome).toBe('returned');
    const second = await invoke(pool, file);
    expect(second.outcome).toBe('returned');
    expect(second.sent).toEqual(['sync:context_expired,unknown_batch,unknown_batch,backend_unavailable']);
    // Nothing reached either invocation's Host callbacks.
    expect(first.settles).toEqual([]);
    expect(first.produced).toEqual([]);
    expect(second.settles).toEqual([]);
    expect(second.produced).toHaveLength(1);
  });
});

describe('WorkerPool: only a declared queue handler is called (MW-02)', () => {
  const cases: [string, (marker: string) => string][] = [
    [
      'an inherited queue',
      (m) => `import { writeFileSync } from 'node:fs';
        export default Object.create({ queue() { writeFileSync(${JSON.stringify(m)}, 'called'); } });`,
    ],
    [
      'an inherited queue on a plain-looking object',
      (m) => `import { writeFileSync } from 'node:fs';
        Object.prototype.queue = function () { writeFileSync(${JSON.stringify(m)}, 'called'); };
        export default { fetch() {} };`,
    ],
    ['a non-function queue', () => `export default { queue: 42 };`],
    ['a null queue', () => `export default { queue: null };`],
    ['no queue (only fetch)', () => `export default { fetch() {}, scheduled() {} };`],
    [
      'a getter queue (never evaluated)',
      (m) => `import { writeFileSync } from 'node:fs';
        export default { get queue() { writeFileSync(${JSON.stringify(m)}, 'getter'); return () => {}; } };`,
    ],
    [
      'a function default export with a queue property',
      (m) => `import { writeFileSync } from 'node:fs';
        function f() {}
        f.queue = () => writeFileSync(${JSON.stringify(m)}, 'called');
        export default f;`,
    ],
    [
      'an array default export',
      (m) => `import { writeFileSync } from 'node:fs';
        const a = []; a.queue = () => writeFileSync(${JSON.stringify(m)}, 'called');
        export default a;`,
    ],
    [
      'a class instance',
      (m) => `import { writeFileSync } from 'node:fs';
        class W { constructor() { this.queue = () => writeFileSync(${JSON.stringify(m)}, 'called'); } }
        export default new W();`,
    ],
    [
      'only a named queue export',
      (m) => `import { writeFileSync } from 'node:fs';
        export function queue() { writeFileSync(${JSON.stringify(m)}, 'called'); }`,
    ],
    ['a null default export', () => `export default null;`],
    [
      'a Proxy default export (no trap reached)',
      (m) => `import { writeFileSync } from 'node:fs';
        const touch = () => writeFileSync(${JSON.stringify(m)}, 'trap');
        export default new Proxy({ queue() { touch(); } }, {
          getPrototypeOf(t) { touch(); return Object.prototype; },
          getOwnPropertyDescriptor(t, k) { touch(); return Reflect.getOwnPropertyDescriptor(t, k); },
          get(t, k) { touch(); return t[k]; },
        });`,
    ],
  ];

  it.each(cases)('%s: reported as threw, nothing called', async (_name, source) => {
    const { pool } = newPool();
    const marker = markerPath();
    const r = await invoke(pool, await moduleFile(source(marker)));
    expect(r.outcome).toBe('threw');
    expect(r.settles).toEqual([]);
    expect(r.produced).toEqual([]);
    await sleep(20);
    expect(existsSync(marker)).toBe(false);
  });

  it('calls an own queue of a null-prototype default export, with `this` the export', async () => {
    const { pool } = newPool();
    const file = await moduleFile(`
      const w = Object.create(null);
      w.queue = async function (batch, env) { await env.OUT.send(String(this === w)); };
      export default w;`);
    const r = await invoke(pool, file);
    expect(r.outcome).toBe('returned');
    expect(r.sent).toEqual(['true']);
  });
});

describe('WorkerPool: batch, env and isolation (MW-03, DL-09)', () => {
  it('gives the handler the frozen batch and exactly the declared env', async () => {
    const { pool } = newPool();
    const file = await moduleFile(`
      export default {
        async queue(batch, env, ctx) {
          const report = {
            batchId: batch.batchId,
            queue: batch.queue,
            batchKeys: Reflect.ownKeys(batch).map(String).sort(),
            frozen: [Object.isFrozen(batch), Object.isFrozen(batch.messages), batch.messages.every(Object.isFrozen)],
            messages: batch.messages.map((m) => ({
              id: m.id, timestampMillis: m.timestampMillis, attempts: m.attempts,
              body: [...m.body], uint8: m.body instanceof Uint8Array,
            })),
            envKeys: Reflect.ownKeys(env).map(String).sort(),
            vars: [env.GREETING, env.LIMIT, env.NESTED],
            bindingKeys: Reflect.ownKeys(env.OUT).map(String).sort(),
            bindingFrozen: Object.isFrozen(env.OUT),
            ctxKeys: Reflect.ownKeys(ctx).map(String),
            processEnv: Object.keys(process.env),
          };
          await env.OUT.send(JSON.stringify(report));
          await env.AUDIT.send(new Uint8Array([7, 0, 255, 128, 9]).subarray(1, 4), { delaySeconds: 30 });
          const ids = await env.OUT.sendBatch([{ body: new ArrayBuffer(2) }, { body: 'é', delaySeconds: 0 }]);
          await env.OUT.send(JSON.stringify(ids));
        },
      };`);
    const d = delivery(2);
    const r = await invoke(pool, file, {
      delivery: d,
      config: {
        vars: { GREETING: 'hello', LIMIT: 5, NESTED: { a: [1, null] } },
        queueProducers: { OUT: { queue: 'out' }, AUDIT: { queue: 'audit' } },
      },
    });
    expect(r.outcome).toBe('returned');
    const report = JSON.parse(r.sent[0]!);
    expect(report).toEqual({
      batchId: d.batchId,
      queue: 'orders',
      batchKeys: ['acknowledge', 'acknowledgeAll', 'batchId', 'messages', 'queue', 'retry', 'retryAll'],
      frozen: [true, true, true],
      messages: d.messages.map((m) => ({
        id: m.id,
        timestampMillis: m.timestampMillis,
        attempts: m.attempts,
        body: [...m.body],
        uint8: true,
      })),
      envKeys: ['AUDIT', 'GREETING', 'LIMIT', 'NESTED', 'OUT'],
      vars: ['hello', 5, { a: [1, null] }],
      bindingKeys: ['send', 'sendBatch'],
      bindingFrozen: true,
      ctxKeys: ['waitUntil'],
      processEnv: [],
    });
    expect(r.produced[1]!.binding).toBe('AUDIT');
    expect(r.produced[1]!.messages).toHaveLength(1);
    expect([...r.produced[1]!.messages[0]!.body]).toEqual([0, 255, 128]);
    expect(r.produced[1]!.messages[0]!.delaySeconds).toBe(30);
    expect(r.produced[2]!.binding).toBe('OUT');
    expect(r.produced[2]!.messages.map((m) => [[...m.body], m.delaySeconds])).toEqual([
      [[0, 0], undefined],
      [[0xc3, 0xa9], 0],
    ]);
    expect(JSON.parse(r.sent.at(-1)!)).toEqual(['msg-3', 'msg-4']);
  });

  it('never lets the batch credential, or bytes around a body, into the thread', async () => {
    const { pool } = newPool({ maxThreadsPerWorker: 1 });
    const file = await moduleFile(`
      import { parentPort } from 'node:worker_threads';
      const seen = [];
      parentPort.on('message', (m) => seen.push(m));
      const buffers = (m) => (m.batch?.messages ?? []).map((x) => new TextDecoder().decode(new Uint8Array(x.body.buffer)));
      let first = true;
      export default {
        async queue(batch, env) {
          if (first) { first = false; return; }
          await env.OUT.send(
            JSON.stringify(seen) + JSON.stringify(seen.map(buffers)) + JSON.stringify(batch) + JSON.stringify(env),
          );
        },
      };`);
    await invoke(pool, file);
    const d = delivery();
    // A body that is a view into a larger buffer holding a secret next to it.
    const slab = new TextEncoder().encode(`body-bytes|${CREDENTIAL}`);
    d.messages[0]!.body = slab.subarray(0, 10);
    const r = await invoke(pool, file, { delivery: d });
    expect(r.sent).toHaveLength(1);
    expect(r.sent[0]).toContain(d.batchId); // the listener did see the invoke message
    expect(r.sent[0]).toContain('body-bytes'); // and its bodies' backing buffers
    expect(r.sent[0]).not.toContain(CREDENTIAL);
    expect([...d.messages[0]!.body]).toEqual([...new TextEncoder().encode('body-bytes')]); // not moved away
  });

  it('never hands a settle call for a message outside the batch to the Host', async () => {
    const { pool } = newPool();
    const file = await moduleFile(`
      import { parentPort } from 'node:worker_threads';
      let invocation;
      parentPort.on('message', (m) => { if (m.type === 'invoke') invocation = m.invocation; });
      export default {
        async queue(batch, env) {
          await new Promise((r) => setTimeout(r, 10));
          parentPort.postMessage({ type: 'settle', invocation, rpc: 1e9, call: { kind: 'ack', index: 99 } });
          parentPort.postMessage({ type: 'settle', invocation, rpc: 1e9 + 1, call: { kind: 'retry', index: 0, delaySeconds: -5 } });
          parentPort.postMessage({ type: 'produce', invocation, rpc: 1e9 + 2, call: { binding: 'NOT_DECLARED', messages: [{ body: new Uint8Array(1) }] } });
          await batch.acknowledge(batch.messages[0].id);
        },
      };`);
    // The module sees its first invoke message only from the second invocation on.
    await invoke(pool, file);
    const r = await invoke(pool, file);
    expect(r.outcome).toBe('returned');
    expect(r.settles).toEqual([{ kind: 'ack', index: 0 }]);
    expect(r.produced).toEqual([]);
  });

  it('refuses, as invalid_body, a send whose fields cannot be carried to the Host', async () => {
    const { pool } = newPool();
    const file = await moduleFile(`
      export default {
        async queue(batch, env) {
          const names = [];
          for (const attempt of [
            () => env.OUT.send('x', { delaySeconds: () => 1 }),
            () => env.OUT.send({ not: 'bytes' }),
            () => env.OUT.sendBatch('nope'),
          ]) {
            try { await attempt(); names.push('resolved'); } catch (e) { names.push(e.name); }
          }
          await env.OUT.send(names.join(','));
        },
      };`);
    const r = await invoke(pool, file);
    expect(r.sent).toEqual(['invalid_body,invalid_body,invalid_body']);
    expect(r.produced).toHaveLength(1);
  });

  it('runs invocations of different modules concurrently without interference', async () => {
    const { pool } = newPool({ timeoutMs: 5_000 });
    const source = (tag: string) => `
      export default {
        async queue(batch, env) {
          await env.OUT.send('${tag}:arrived');
          await batch.acknowledge(batch.messages[${tag === 'a' ? 0 : 1}].id);
          globalThis.tag = (globalThis.tag ?? '') + '${tag}';
          await env.OUT.send('${tag}:' + globalThis.tag);
        },
      };`;
    const [fileA, fileB] = await Promise.all([moduleFile(source('a')), moduleFile(source('b'))]);
    // Each produce call of 'arrived' waits until the other module has arrived too: run one after
    // the other, neither could finish (they would be cut off after the timeout).
    const arrived = new Set<string>();
    const waiters: (() => void)[] = [];
    const rendezvous = (tag: string) => {
      arrived.add(tag);
      if (arrived.size === 2) for (const w of waiters.splice(0)) w();
      return arrived.size === 2 ? Promise.resolve() : new Promise<void>((r) => waiters.push(r));
    };
    const produce = (sent: string[]) => async (call: ProduceCall) => {
      const text = decode(call.messages[0]!.body);
      sent.push(text);
      if (text.endsWith(':arrived')) await rendezvous(text.split(':')[0]!);
      return ['id'];
    };
    const sentA: string[] = [];
    const sentB: string[] = [];
    const dA = delivery(2);
    const dB = delivery(2);
    const settlesA: SettleCall[] = [];
    const settlesB: SettleCall[] = [];
    const [a, b] = await Promise.all([
      invoke(pool, fileA, {
        delivery: dA,
        produce: produce(sentA),
        settle: async (c) => void settlesA.push(c),
      }),
      invoke(pool, fileB, {
        delivery: dB,
        produce: produce(sentB),
        settle: async (c) => void settlesB.push(c),
      }),
    ]);
    expect([a.outcome, b.outcome]).toEqual(['returned', 'returned']);
    expect(sentA).toEqual(['a:arrived', 'a:a']);
    expect(sentB).toEqual(['b:arrived', 'b:b']);
    expect(settlesA).toEqual([{ kind: 'ack', index: 0 }]);
    expect(settlesB).toEqual([{ kind: 'ack', index: 1 }]);
  });

  it('runs at most maxThreadsPerWorker invocations of one module at once, queueing the rest', async () => {
    const { pool } = newPool({ timeoutMs: 5_000, maxThreadsPerWorker: 2 });
    const file = await moduleFile(`
      export default { async queue(batch, env) { await env.OUT.send('start'); } };`);
    let running = 0;
    let peak = 0;
    const gates: (() => void)[] = [];
    const produce = async () => {
      running++;
      peak = Math.max(peak, running);
      await new Promise<void>((r) => gates.push(r));
      running--;
      return ['id'];
    };
    const all = Promise.all([1, 2, 3, 4].map(() => invoke(pool, file, { produce })));
    await vi.waitFor(() => expect(gates.length).toBe(2));
    await sleep(100);
    expect(gates.length).toBe(2); // the other two wait for a thread
    for (const g of gates.splice(0)) g();
    await vi.waitFor(() => expect(gates.length).toBe(2));
    for (const g of gates.splice(0)) g();
    const results = await all;
    expect(results.map((r) => r.outcome)).toEqual(['returned', 'returned', 'returned', 'returned']);
    expect(peak).toBe(2);
  });

  it('reuses a thread (module state persists, like an isolate) and imports a changed file anew', async () => {
    const { pool } = newPool({ maxThreadsPerWorker: 1 });
    const file = await moduleFile(`
      let n = 0;
      export default { async queue(batch, env) { n += 1; await env.OUT.send('v1:' + n); } };`);
    expect((await invoke(pool, file)).sent).toEqual(['v1:1']);
    expect((await invoke(pool, file)).sent).toEqual(['v1:2']);
    await writeFile(file, `export default { async queue(batch, env) { await env.OUT.send('v2'); } };`);
    expect((await invoke(pool, file)).sent).toEqual(['v2']);
  });

  it('prefixes thread console output with the worker name and keeps it off stdout', async () => {
    const { pool, output } = newPool();
    const file = await moduleFile(
      `export default { queue(batch) { console.log('hello from', batch.queue); console.error('oops\\ntwo lines'); } };`,
      'chatty',
    );
    const stdout = vi.spyOn(process.stdout, 'write');
    try {
      expect((await invoke(pool, file)).outcome).toBe('returned');
      await vi.waitFor(() => expect(output).toContain('[worker default/chatty] two lines'));
      expect(output).toContain('[worker default/chatty] hello from orders');
      expect(output).toContain('[worker default/chatty] oops');
      expect(stdout.mock.calls.flat().join('')).not.toContain('hello from');
    } finally {
      stdout.mockRestore();
    }
  });

  it('refuses new invocations after close() and abandons running ones', async () => {
    const { pool } = newPool({ timeoutMs: 10_000 });
    const file = await moduleFile(`export default { queue() { return new Promise(() => {}); } };`);
    const running = invoke(pool, file);
    await sleep(100);
    await pool.close();
    expect((await running).outcome).toBe('abandoned');
    await expect(invoke(pool, file)).rejects.toThrow(/closed/);
  });
});
