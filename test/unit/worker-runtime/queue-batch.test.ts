import { inspect } from 'node:util';
import { describe, expect, it, vi } from 'vitest';
import { NamedError } from '../../../lambdas/delivery/limits.ts';
import type { BatchDelivery, SettleCall } from '../../../lambdas/delivery/settlement-protocol.ts';
import { type BatchAuth, createQueueBatch } from '../../../lambdas/worker-runtime/queue-batch.ts';

const CREDENTIAL = 'cred-7f3a9c1e5b2d4f6a8c0e1b3d5f7a9c1e';

function delivery(): BatchDelivery {
  return {
    batchId: 'batch-1',
    credential: CREDENTIAL,
    queue: 'orders',
    messages: [
      { id: 'm-0', timestampMillis: 1_700_000_000_000, body: new Uint8Array([0, 1, 2, 255]), attempts: 1 },
      { id: 'm-1', timestampMillis: 1_700_000_000_001, body: new TextEncoder().encode('héllo'), attempts: 3 },
      { id: 'm-2', timestampMillis: 1_700_000_000_002, body: new Uint8Array(0), attempts: 2 },
    ],
  };
}

function recording(answer: (call: SettleCall) => Promise<void> = async () => undefined) {
  const calls: { call: SettleCall; auth: BatchAuth }[] = [];
  const settle = vi.fn(async (call: SettleCall, auth: BatchAuth) => {
    calls.push({ call, auth });
    return answer(call);
  });
  return { transport: { settle }, calls, settle };
}

const METHODS = ['acknowledge', 'retry', 'acknowledgeAll', 'retryAll'] as const;

describe('createQueueBatch: shape (MW-03)', () => {
  it('exposes batchId, queue and messages with copies of the bodies', () => {
    const batch = createQueueBatch(delivery(), recording().transport);
    expect(batch.batchId).toBe('batch-1');
    expect(batch.queue).toBe('orders');
    expect(batch.messages.map((m) => [m.id, m.timestampMillis, [...m.body], m.attempts])).toEqual([
      ['m-0', 1_700_000_000_000, [0, 1, 2, 255], 1],
      ['m-1', 1_700_000_000_001, [...new TextEncoder().encode('héllo')], 3],
      ['m-2', 1_700_000_000_002, [], 2],
    ]);
    for (const m of batch.messages) {
      expect(m.body).toBeInstanceOf(Uint8Array);
      expect(Object.getPrototypeOf(m.body)).toBe(Uint8Array.prototype);
    }
  });

  it('has exactly the seven own properties, all non-writable and non-configurable, on Object.prototype', () => {
    const batch = createQueueBatch(delivery(), recording().transport);
    expect(Reflect.ownKeys(batch).sort()).toEqual(
      ['acknowledge', 'acknowledgeAll', 'batchId', 'messages', 'queue', 'retry', 'retryAll'].sort(),
    );
    for (const key of Reflect.ownKeys(batch)) {
      const desc = Object.getOwnPropertyDescriptor(batch, key)!;
      expect(desc.writable, String(key)).toBe(false);
      expect(desc.configurable, String(key)).toBe(false);
      expect(desc.get).toBeUndefined();
    }
    for (const m of METHODS) expect(typeof batch[m]).toBe('function');
    expect(Object.getPrototypeOf(batch)).toBe(Object.prototype);
  });

  it('is frozen, and so are messages, each message and each method', () => {
    const batch = createQueueBatch(delivery(), recording().transport);
    expect(Object.isFrozen(batch)).toBe(true);
    expect(Object.isFrozen(batch.messages)).toBe(true);
    for (const m of batch.messages) expect(Object.isFrozen(m)).toBe(true);
    for (const m of METHODS) expect(Object.isFrozen(batch[m])).toBe(true);
    expect(() => {
      (batch as { batchId: string }).batchId = 'other';
    }).toThrow(TypeError);
    expect(() => {
      (batch.messages as unknown[]).push({});
    }).toThrow(TypeError);
    expect(() => {
      (batch.messages[0] as { body: Uint8Array }).body = new Uint8Array(1);
    }).toThrow(TypeError);
    expect(() => {
      (batch as unknown as { acknowledge: unknown }).acknowledge = () => undefined;
    }).toThrow(TypeError);
  });

  it('copies each body: later changes to the delivered bytes do not show, and reads are stable', () => {
    const d = delivery();
    const batch = createQueueBatch(d, recording().transport);
    d.messages[0]!.body[0] = 99;
    d.messages[1]!.body.fill(0);
    expect([...batch.messages[0]!.body]).toEqual([0, 1, 2, 255]);
    expect(new TextDecoder().decode(batch.messages[1]!.body)).toBe('héllo');
    expect(batch.messages[0]!.body).toBe(batch.messages[0]!.body);
    // Each body owns a buffer of exactly its length: nothing else is reachable through it.
    for (let i = 0; i < 3; i++) {
      const body = batch.messages[i]!.body;
      expect(body.byteOffset).toBe(0);
      expect(body.buffer.byteLength).toBe(body.byteLength);
      expect(body.buffer).not.toBe(d.messages[i]!.body.buffer);
    }
    expect(batch.messages[0]!.body.buffer).not.toBe(batch.messages[1]!.body.buffer);
  });

  it('copies a body that is a view into a larger buffer as exactly the viewed bytes', () => {
    const shared = new Uint8Array([9, 9, 1, 2, 3, 9]);
    const d = delivery();
    d.messages[0]!.body = shared.subarray(2, 5);
    const body = createQueueBatch(d, recording().transport).messages[0]!.body;
    expect([...body]).toEqual([1, 2, 3]);
    expect(body.buffer.byteLength).toBe(3);
  });
});

describe('createQueueBatch: the credential is unreachable (DL-09)', () => {
  /** Every value reachable from `root` through own properties (getters not run) and prototypes. */
  function reachable(root: unknown): unknown[] {
    const seen = new Set<unknown>();
    const queue: unknown[] = [root];
    while (queue.length > 0) {
      const value = queue.shift();
      if (seen.has(value)) continue;
      seen.add(value);
      if ((typeof value !== 'object' && typeof value !== 'function') || value === null) continue;
      queue.push(Object.getPrototypeOf(value));
      for (const key of Reflect.ownKeys(value)) {
        if (typeof key === 'symbol') queue.push(key.description);
        else queue.push(key);
        const desc = Object.getOwnPropertyDescriptor(value, key)!;
        if ('value' in desc) queue.push(desc.value);
        else queue.push(desc.get, desc.set);
      }
    }
    return [...seen];
  }

  it('appears in no string, key, symbol or prototype reachable from the batch', () => {
    const batch = createQueueBatch(delivery(), recording().transport);
    const strings = reachable(batch).filter((v): v is string => typeof v === 'string');
    expect(strings.length).toBeGreaterThan(10);
    expect(strings.some((s) => s.includes(CREDENTIAL))).toBe(false);
    expect(Object.getOwnPropertySymbols(batch)).toEqual([]);
    expect(Object.getOwnPropertyNames(batch)).not.toContain('credential');
    expect(Reflect.ownKeys(batch)).not.toContain('credential');
    expect('credential' in batch).toBe(false);
  });

  it('appears in neither JSON, inspect output, method sources nor any message body', () => {
    const batch = createQueueBatch(delivery(), recording().transport);
    expect(JSON.stringify(batch)).not.toContain(CREDENTIAL);
    expect(
      inspect(batch, { showHidden: true, depth: Number.POSITIVE_INFINITY, getters: true }),
    ).not.toContain(CREDENTIAL);
    for (const m of METHODS) expect(String(batch[m])).not.toContain(CREDENTIAL);
    const bytes = new TextEncoder().encode(CREDENTIAL);
    for (const m of batch.messages) {
      const text = new TextDecoder().decode(new Uint8Array(m.body.buffer));
      expect(text).not.toContain(CREDENTIAL);
      expect(m.body.buffer.byteLength).toBeLessThan(bytes.length);
    }
  });

  it('goes only to the transport, with the batch id', async () => {
    const { transport, calls } = recording();
    await createQueueBatch(delivery(), transport).acknowledgeAll();
    expect(calls[0]!.auth).toEqual({ batchId: 'batch-1', credential: CREDENTIAL });
  });
});

describe('createQueueBatch: argument errors reject TypeError (host-profile §4)', () => {
  it.each<[string, unknown]>([
    ['a number', 1],
    ['undefined', undefined],
    ['null', null],
    ['an object', { id: 'm-0' }],
    ['a String object', new String('m-0')],
    ['a symbol', Symbol('m-0')],
  ])('acknowledge and retry reject a non-string id (%s)', async (_name, id) => {
    const { transport, settle } = recording();
    const batch = createQueueBatch(delivery(), transport);
    await expect(batch.acknowledge(id as string)).rejects.toBeInstanceOf(TypeError);
    await expect(batch.retry(id as string)).rejects.toBeInstanceOf(TypeError);
    expect(settle).not.toHaveBeenCalled();
  });

  it.each<[string, unknown]>([
    ['-1', -1],
    ['1.5', 1.5],
    ['43201', 43_201],
    ['"5"', '5'],
    ['null', null],
    ['NaN', Number.NaN],
    ['Infinity', Number.POSITIVE_INFINITY],
    ['5n', 5n],
    ['true', true],
  ])('retry and retryAll reject delaySeconds %s', async (_name, delay) => {
    const { transport, settle } = recording();
    const batch = createQueueBatch(delivery(), transport);
    await expect(batch.retry('m-0', delay as number)).rejects.toBeInstanceOf(TypeError);
    await expect(batch.retryAll(delay as number)).rejects.toBeInstanceOf(TypeError);
    // A bad delay is a TypeError even with an id outside the batch.
    await expect(batch.retry('nope', delay as number)).rejects.toBeInstanceOf(TypeError);
    expect(settle).not.toHaveBeenCalled();
  });

  it('never throws synchronously: every method returns a Promise', () => {
    const batch = createQueueBatch(delivery(), recording().transport);
    const results = [
      batch.acknowledge(1 as unknown as string),
      batch.retry('m-0', -1),
      batch.retryAll(-1),
      batch.acknowledge('nope'),
    ];
    for (const p of results) {
      expect(p).toBeInstanceOf(Promise);
      p.catch(() => undefined);
    }
  });
});

describe('createQueueBatch: settlement calls (DL-03, DL-04)', () => {
  it('maps ids to their index and passes delays through', async () => {
    const { transport, calls } = recording();
    const batch = createQueueBatch(delivery(), transport);
    await expect(batch.acknowledge('m-2')).resolves.toBeUndefined();
    await expect(batch.retry('m-1')).resolves.toBeUndefined();
    await expect(batch.retry('m-0', 0)).resolves.toBeUndefined();
    await expect(batch.retry('m-0', 43_200)).resolves.toBeUndefined();
    await expect(batch.retry('m-1', undefined)).resolves.toBeUndefined();
    await expect(batch.acknowledgeAll()).resolves.toBeUndefined();
    await expect(batch.retryAll()).resolves.toBeUndefined();
    await expect(batch.retryAll(30)).resolves.toBeUndefined();
    expect(calls.map((c) => c.call)).toEqual([
      { kind: 'ack', index: 2 },
      { kind: 'retry', index: 1 },
      { kind: 'retry', index: 0, delaySeconds: 0 },
      { kind: 'retry', index: 0, delaySeconds: 43_200 },
      { kind: 'retry', index: 1 },
      { kind: 'ackAll' },
      { kind: 'retryAll' },
      { kind: 'retryAll', delaySeconds: 30 },
    ]);
    // An omitted delay is omitted, not sent as undefined.
    expect(Object.keys(calls[1]!.call)).toEqual(['kind', 'index']);
    expect(Object.keys(calls[6]!.call)).toEqual(['kind']);
  });

  it('sends -0 as 0', async () => {
    const { transport, calls } = recording();
    await createQueueBatch(delivery(), transport).retry('m-0', -0);
    expect(Object.is((calls[0]!.call as { delaySeconds: number }).delaySeconds, 0)).toBe(true);
  });

  it.each(['m-3', '', 'M-0', ' m-0', 'constructor', '__proto__', 'toString'])(
    'rejects unknown_message for %j without calling the transport',
    async (id) => {
      const { transport, settle } = recording();
      const batch = createQueueBatch(delivery(), transport);
      const ack = await batch.acknowledge(id).catch((e: unknown) => e);
      const retry = await batch.retry(id, 10).catch((e: unknown) => e);
      for (const err of [ack, retry]) {
        expect(err).toBeInstanceOf(NamedError);
        expect((err as Error).name).toBe('unknown_message');
      }
      expect(settle).not.toHaveBeenCalled();
    },
  );

  it('rejects unknown_message for an id of another batch', async () => {
    const { transport, settle } = recording();
    const other = createQueueBatch(
      {
        ...delivery(),
        batchId: 'batch-2',
        messages: [{ id: 'x-0', timestampMillis: 0, body: new Uint8Array(), attempts: 1 }],
      },
      transport,
    );
    const batch = createQueueBatch(delivery(), transport);
    await expect(batch.acknowledge(other.messages[0]!.id)).rejects.toMatchObject({ name: 'unknown_message' });
    expect(settle).not.toHaveBeenCalled();
  });

  it.each(['already_settled', 'unknown_batch', 'backend_unavailable'] as const)(
    'passes the transport rejection %s through unchanged',
    async (name) => {
      const failure = new NamedError(name, 'from the Host');
      const { transport } = recording(async () => {
        throw failure;
      });
      const batch = createQueueBatch(delivery(), transport);
      for (const p of [
        batch.acknowledge('m-0'),
        batch.retry('m-1', 5),
        batch.acknowledgeAll(),
        batch.retryAll(),
      ]) {
        const err = await p.catch((e: unknown) => e);
        expect(err).toBe(failure);
        expect((err as Error).name).toBe(name);
      }
    },
  );

  it('turns a transport that throws synchronously into a rejection', async () => {
    const failure = new NamedError('backend_unavailable', 'sync');
    const batch = createQueueBatch(delivery(), {
      settle: () => {
        throw failure;
      },
    });
    await expect(batch.acknowledge('m-0')).rejects.toBe(failure);
  });

  it('resolves only when the transport does (a resolved Promise means durable)', async () => {
    let release!: () => void;
    const { transport } = recording(() => new Promise<void>((r) => (release = r)));
    const batch = createQueueBatch(delivery(), transport);
    let resolved = false;
    const p = batch.acknowledge('m-0').then(() => (resolved = true));
    await new Promise((r) => setTimeout(r, 10));
    expect(resolved).toBe(false);
    release();
    await p;
    expect(resolved).toBe(true);
  });

  it('ignores extra arguments of acknowledge and acknowledgeAll', async () => {
    const { transport, calls } = recording();
    const batch = createQueueBatch(delivery(), transport);
    await (batch.acknowledge as (...a: unknown[]) => Promise<void>)('m-0', 5);
    await (batch.acknowledgeAll as (...a: unknown[]) => Promise<void>)(5);
    expect(calls.map((c) => c.call)).toEqual([{ kind: 'ack', index: 0 }, { kind: 'ackAll' }]);
  });
});
