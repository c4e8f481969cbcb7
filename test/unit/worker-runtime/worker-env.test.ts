import { describe, expect, it, vi } from 'vitest';
import { NamedError } from '../../../lambdas/delivery/limits.ts';
import type { ProduceCall } from '../../../lambdas/delivery/settlement-protocol.ts';
import { createInvocationContext } from '../../../lambdas/worker-runtime/invocation-context.ts';
import {
  bodyBytes,
  createWorkerEnv,
  type QueueProducerBinding,
} from '../../../lambdas/worker-runtime/worker-env.ts';

function recording(ids: (call: ProduceCall) => string[] = (call) => call.messages.map((_, i) => `id-${i}`)) {
  const calls: ProduceCall[] = [];
  const produce = vi.fn(async (call: ProduceCall) => {
    calls.push(call);
    return ids(call);
  });
  return { produce, calls };
}

const tick = (ms = 5) => new Promise((r) => setTimeout(r, ms));

const vars = { API_URL: 'https://example.test', retries: 3, flags: { a: [1, 2] }, nothing: null, on: true };

describe('createWorkerEnv: keys (MW-03)', () => {
  it('has exactly the vars keys and the binding names as own enumerable keys', () => {
    const env = createWorkerEnv({
      vars,
      producerBindings: ['OUT', 'audit_log'],
      produce: recording().produce,
    });
    expect(Reflect.ownKeys(env).sort()).toEqual([
      'API_URL',
      'OUT',
      'audit_log',
      'flags',
      'nothing',
      'on',
      'retries',
    ]);
    expect(Object.keys(env).sort()).toEqual(Reflect.ownKeys(env).sort());
    expect(Object.getOwnPropertySymbols(env)).toEqual([]);
  });

  it('gives var values as given', () => {
    const env = createWorkerEnv({ vars, producerBindings: [], produce: recording().produce });
    expect(env.API_URL).toBe('https://example.test');
    expect(env.retries).toBe(3);
    expect(env.flags).toEqual({ a: [1, 2] });
    expect(env.nothing).toBeNull();
    expect(env.on).toBe(true);
  });

  it('is empty without vars and bindings', () => {
    expect(
      Reflect.ownKeys(createWorkerEnv({ vars: {}, producerBindings: [], produce: recording().produce })),
    ).toEqual([]);
  });

  it('is frozen', () => {
    const env = createWorkerEnv({ vars, producerBindings: ['OUT'], produce: recording().produce });
    expect(Object.isFrozen(env)).toBe(true);
    expect(() => {
      (env as Record<string, unknown>).EXTRA = 1;
    }).toThrow(TypeError);
  });

  it('keeps a binding named __proto__ an ordinary key', () => {
    const env = createWorkerEnv({ vars: {}, producerBindings: ['__proto__'], produce: recording().produce });
    expect(Object.keys(env)).toEqual(['__proto__']);
    expect(Object.getPrototypeOf(env)).toBe(Object.prototype);
  });

  it('throws when a name is both a var and a binding, or a binding twice', () => {
    const { produce } = recording();
    expect(() => createWorkerEnv({ vars: { OUT: 'x' }, producerBindings: ['OUT'], produce })).toThrow(/OUT/);
    expect(() => createWorkerEnv({ vars: {}, producerBindings: ['A', 'A'], produce })).toThrow(/A/);
  });
});

describe('createWorkerEnv: producer bindings', () => {
  it('are frozen objects with only send and sendBatch', () => {
    const env = createWorkerEnv({ vars: {}, producerBindings: ['OUT'], produce: recording().produce });
    const binding = env.OUT as QueueProducerBinding;
    expect(Reflect.ownKeys(binding).sort()).toEqual(['send', 'sendBatch']);
    expect(Object.isFrozen(binding)).toBe(true);
    expect(Object.getPrototypeOf(binding)).toBe(Object.prototype);
    for (const m of ['acknowledge', 'retry', 'acknowledgeAll', 'retryAll', 'receive']) {
      expect(m in binding).toBe(false);
    }
  });

  it('send forwards one message to produce with the binding name and resolves to its id', async () => {
    const { produce, calls } = recording(() => ['msg-42']);
    const env = createWorkerEnv({ vars: {}, producerBindings: ['OUT', 'OTHER'], produce });
    await expect((env.OUT as QueueProducerBinding).send('hi')).resolves.toBe('msg-42');
    await expect((env.OTHER as QueueProducerBinding).send('hi', { delaySeconds: 30 })).resolves.toBe(
      'msg-42',
    );
    expect(calls).toEqual([
      { binding: 'OUT', messages: [{ body: new TextEncoder().encode('hi') }] },
      { binding: 'OTHER', messages: [{ body: new TextEncoder().encode('hi'), delaySeconds: 30 }] },
    ]);
    expect(Object.keys(calls[0]!.messages[0]!)).toEqual(['body']);
  });

  it('sendBatch forwards the messages in order and resolves to the ids in order', async () => {
    const { produce, calls } = recording();
    const env = createWorkerEnv({ vars: {}, producerBindings: ['OUT'], produce });
    const ids = await (env.OUT as QueueProducerBinding).sendBatch([
      { body: 'a' },
      { body: new Uint8Array([1, 2]), delaySeconds: 0 },
      { body: new ArrayBuffer(3), delaySeconds: 900 },
    ]);
    expect(ids).toEqual(['id-0', 'id-1', 'id-2']);
    expect(calls).toHaveLength(1);
    expect(calls[0]!.binding).toBe('OUT');
    expect(calls[0]!.messages.map((m) => [[...m.body], m.delaySeconds])).toEqual([
      [[97], undefined],
      [[1, 2], 0],
      [[0, 0, 0], 900],
    ]);
  });

  it('passes other fields through for the Host to refuse (validation is Host-side)', async () => {
    const { produce, calls } = recording();
    const env = createWorkerEnv({ vars: {}, producerBindings: ['OUT'], produce });
    const out = env.OUT as QueueProducerBinding;
    await out.send('x', { delaySeconds: 1.5, extra: 1 } as { delaySeconds: number });
    await out.sendBatch([]);
    expect(calls[0]!.messages[0]).toEqual({
      body: new TextEncoder().encode('x'),
      delaySeconds: 1.5,
      extra: 1,
    });
    expect(calls[1]!.messages).toEqual([]);
  });

  it('passes the Host rejection through', async () => {
    const failure = Object.assign(new Error('too big'), { name: 'message_too_large' });
    const env = createWorkerEnv({
      vars: {},
      producerBindings: ['OUT'],
      produce: async () => {
        throw failure;
      },
    });
    await expect((env.OUT as QueueProducerBinding).send('x')).rejects.toBe(failure);
  });

  it.each<[string, unknown]>([
    ['a number', 5],
    ['null', null],
    ['undefined', undefined],
    ['a plain object', { length: 2 }],
    ['an array', [1, 2]],
    ['a String object', new String('x')],
    ['a Blob', new Blob(['x'])],
    ['a SharedArrayBuffer', new SharedArrayBuffer(2)],
  ])('rejects invalid_body locally for a body that is %s', async (_name, body) => {
    const { produce } = recording();
    const out = createWorkerEnv({ vars: {}, producerBindings: ['OUT'], produce }).OUT as QueueProducerBinding;
    await expect(out.send(body as string)).rejects.toMatchObject({ name: 'invalid_body' });
    await expect(out.sendBatch([{ body: 'ok' }, { body: body as string }])).rejects.toMatchObject({
      name: 'invalid_body',
    });
    expect(produce).not.toHaveBeenCalled();
  });

  it.each<[string, unknown]>([
    ['options that are a number', 5],
    ['options that are null', null],
  ])('rejects invalid_body for %s', async (_name, options) => {
    const { produce } = recording();
    const out = createWorkerEnv({ vars: {}, producerBindings: ['OUT'], produce }).OUT as QueueProducerBinding;
    await expect(out.send('x', options as { delaySeconds: number })).rejects.toMatchObject({
      name: 'invalid_body',
    });
    expect(produce).not.toHaveBeenCalled();
  });

  it('rejects invalid_body for a sendBatch argument that is not an array of objects', async () => {
    const { produce } = recording();
    const out = createWorkerEnv({ vars: {}, producerBindings: ['OUT'], produce }).OUT as QueueProducerBinding;
    for (const arg of [undefined, 'abc', { body: 'x' }, ['x'], [null]]) {
      await expect(out.sendBatch(arg as never)).rejects.toMatchObject({ name: 'invalid_body' });
    }
    expect(produce).not.toHaveBeenCalled();
  });
});

describe('bodyBytes: exact bytes', () => {
  it('takes a whole ArrayBuffer', () => {
    const buf = new Uint8Array([0, 255, 128, 7]).buffer;
    const bytes = bodyBytes(buf);
    expect([...bytes]).toEqual([0, 255, 128, 7]);
    expect(bytes.buffer).not.toBe(buf);
  });

  it('takes exactly the bytes a view views, for every kind of view', () => {
    const backing = new Uint8Array([10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21]);
    expect([...bodyBytes(backing.subarray(3, 6))]).toEqual([13, 14, 15]);
    expect([...bodyBytes(new DataView(backing.buffer, 2, 3))]).toEqual([12, 13, 14]);
    expect([...bodyBytes(new Uint16Array(backing.buffer, 4, 2))]).toEqual([14, 15, 16, 17]);
    expect([...bodyBytes(new Float64Array([1]))]).toEqual([...new Uint8Array(new Float64Array([1]).buffer)]);
    expect([...bodyBytes(Buffer.from([1, 2, 3]))]).toEqual([1, 2, 3]);
    const fromBuffer = bodyBytes(Buffer.from('pooled'));
    expect(fromBuffer.buffer.byteLength).toBe(6);
  });

  it('copies: changing the source afterwards does not change the bytes sent', () => {
    const source = new Uint8Array([1, 2, 3]);
    const bytes = bodyBytes(source);
    source[0] = 9;
    expect([...bytes]).toEqual([1, 2, 3]);
    expect(Object.getPrototypeOf(bytes)).toBe(Uint8Array.prototype);
  });

  it('copies a view of a SharedArrayBuffer into an unshared buffer', () => {
    const shared = new Uint8Array(new SharedArrayBuffer(4));
    shared.set([4, 3, 2, 1]);
    const bytes = bodyBytes(shared.subarray(1));
    expect([...bytes]).toEqual([3, 2, 1]);
    expect(bytes.buffer).toBeInstanceOf(ArrayBuffer);
  });

  it('encodes strings as UTF-8, lone surrogates as U+FFFD', () => {
    expect([...bodyBytes('')]).toEqual([]);
    expect([...bodyBytes('aé😀')]).toEqual([0x61, 0xc3, 0xa9, 0xf0, 0x9f, 0x98, 0x80]);
    expect([...bodyBytes('\ud800')]).toEqual([0xef, 0xbf, 0xbd]);
    expect([...bodyBytes('\u0000')]).toEqual([0]);
  });

  it('refuses a detached buffer', () => {
    const buf = new ArrayBuffer(4);
    structuredClone(buf, { transfer: [buf] });
    expect(() => bodyBytes(buf)).toThrow(expect.objectContaining({ name: 'invalid_body' }));
  });
});

describe('createInvocationContext: ctx, the third handler argument', () => {
  it('gives worker code a frozen ctx with only waitUntil', () => {
    const { ctx } = createInvocationContext();
    expect(Reflect.ownKeys(ctx)).toEqual(['waitUntil']);
    expect(Object.isFrozen(ctx)).toBe(true);
    expect(Object.isFrozen(ctx.waitUntil)).toBe(true);
  });

  it('settled() waits for registered promises, including ones registered while waiting', async () => {
    const c = createInvocationContext();
    let first!: () => void;
    let second!: () => void;
    c.ctx.waitUntil(
      new Promise<void>((r) => {
        first = r;
      }).then(() => {
        c.ctx.waitUntil(
          new Promise<void>((r) => {
            second = r;
          }),
        );
      }),
    );
    let done = false;
    const waiting = c.settled().then(() => (done = true));
    await tick();
    expect(done).toBe(false);
    first();
    await tick();
    expect(done).toBe(false);
    second();
    await waiting;
    expect(done).toBe(true);
  });

  it('records rejections without rejecting settled()', async () => {
    const c = createInvocationContext();
    const boom = new Error('boom');
    c.ctx.waitUntil(Promise.reject(boom));
    c.ctx.waitUntil(Promise.resolve(1));
    c.ctx.waitUntil(42);
    await expect(c.settled()).resolves.toBeUndefined();
    expect(c.rejections).toEqual([boom]);
  });

  it('resolves at once with nothing registered', async () => {
    await expect(createInvocationContext().settled()).resolves.toBeUndefined();
  });

  it('throws context_expired synchronously after expire()', () => {
    const c = createInvocationContext();
    c.expire();
    expect(c.expired).toBe(true);
    let caught: unknown;
    try {
      c.ctx.waitUntil(Promise.resolve());
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(NamedError);
    expect((caught as Error).name).toBe('context_expired');
  });
});
