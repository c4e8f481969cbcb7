import {
  SendMessageBatchCommand,
  type SendMessageBatchRequestEntry,
  SendMessageCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { sqsMessageQueue } from '../../../lambdas/adapters/aws/sqs-message-queue.ts';
import { decodeEnvelope, type Envelope } from '../../../lambdas/delivery/envelope.ts';
import { MAX_RETENTION_SECONDS } from '../../../lambdas/delivery/limits.ts';
import type { CommitStore, QueueTarget } from '../../../lambdas/delivery/ports.ts';
import { COMMIT_DEADLINE_MS, QueueProducer } from '../../../lambdas/delivery/producer.ts';

const NOW = 1_700_000_000_123;

const target = (over: Partial<QueueTarget> = {}): QueueTarget => ({
  queueUid: 'rQUEUE',
  queueName: 'orders',
  space: 'team',
  sqsUrl: 'http://sqs.test/000000000000/q-rQUEUE',
  defaultDelaySeconds: 0,
  retentionSeconds: 3600,
  ...over,
});

type Event =
  | { kind: 'single'; input: SendMessageCommand['input'] }
  | { kind: 'batch'; input: SendMessageBatchCommand['input'] }
  | { kind: 'commit'; id: string; expiresAt: number };

/**
 * A recording stand-in for SQS and the commit store. `failEntry` decides, per batch call and
 * entry, whether SQS reports the entry as failed; `throwOn` makes a whole call throw.
 */
function fakes(
  opts: {
    failEntry?: (call: number, entry: SendMessageBatchRequestEntry) => boolean;
    throwOn?: (call: number) => boolean;
    commitFailures?: number;
    clock?: () => number;
  } = {},
) {
  const events: Event[] = [];
  let calls = 0;
  let commitFailures = opts.commitFailures ?? 0;
  const sqs = {
    send: async (command: unknown) => {
      const call = ++calls;
      await new Promise((r) => setTimeout(r, 1));
      if (opts.throwOn?.(call)) throw Object.assign(new Error('boom'), { name: 'ServiceUnavailable' });
      if (command instanceof SendMessageCommand) {
        events.push({ kind: 'single', input: command.input });
        return { MessageId: `sqs-${call}` };
      }
      if (command instanceof SendMessageBatchCommand) {
        events.push({ kind: 'batch', input: command.input });
        const entries = command.input.Entries ?? [];
        const failed = entries.filter((e) => opts.failEntry?.(call, e));
        return {
          Successful: entries
            .filter((e) => !failed.includes(e))
            .map((e) => ({ Id: e.Id, MessageId: `sqs-${call}-${e.Id}`, MD5OfMessageBody: '' })),
          Failed: failed.map((e) => ({ Id: e.Id, Code: 'InternalError', SenderFault: false })),
        };
      }
      throw new Error(`unexpected command ${String(command)}`);
    },
  };
  const commits: CommitStore = {
    putCommit: async (id, expiresAt) => {
      if (commitFailures > 0) {
        commitFailures--;
        throw Object.assign(new Error('ddb down'), { name: 'InternalServerError' });
      }
      events.push({ kind: 'commit', id, expiresAt });
    },
    committed: async () => new Set(),
  };
  let ids = 0;
  const producer = new QueueProducer({
    messages: sqsMessageQueue(sqs as unknown as SQSClient),
    commits,
    clock: opts.clock ?? (() => NOW),
    newMessageId: () => `m${String(++ids).padStart(4, '0')}`,
    newCommitId: () => 'c-commit-1',
  });
  const singles = () => events.flatMap((e) => (e.kind === 'single' ? [e.input] : []));
  const batches = () => events.flatMap((e) => (e.kind === 'batch' ? [e.input] : []));
  const entries = () => batches().flatMap((b) => b.Entries ?? []);
  const commitEvents = () => events.filter((e) => e.kind === 'commit');
  return { producer, events, singles, batches, entries, commitEvents };
}

const decoded = (text: string | undefined): Envelope => {
  const e = decodeEnvelope(text);
  if (!e) throw new Error('not an envelope');
  return e;
};

/** The rejection of a promise, for asserting names and classes. */
async function rejection(p: Promise<unknown>): Promise<Error> {
  try {
    await p;
  } catch (err) {
    return err as Error;
  }
  throw new Error('expected a rejection');
}

async function expectName(p: Promise<unknown>, name: string): Promise<void> {
  const err = await rejection(p);
  expect(err).toBeInstanceOf(Error);
  expect(err.name).toBe(name);
}

async function expectTypeError(p: Promise<unknown>): Promise<void> {
  expect(await rejection(p)).toBeInstanceOf(TypeError);
}

afterEach(() => {
  vi.restoreAllMocks();
});

describe('QueueProducer.send: bodies', () => {
  it('AQ-04 DL-10 sends the exact bytes of an ArrayBuffer, a Uint8Array, a partial DataView, a Buffer and a UTF-8 string', async () => {
    const f = fakes();
    const backing = new Uint8Array([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 250, 255]);
    const view = new DataView(backing.buffer, 3, 5);
    const pooled = Buffer.from('pooled-bytes\u0000\u00ff', 'latin1'); // a slice of Node's shared pool
    const cases: [unknown, number[]][] = [
      [backing.buffer.slice(2, 6), [2, 3, 4, 5]],
      [new Uint8Array([0, 255, 128, 10]), [0, 255, 128, 10]],
      [new Uint8Array(backing.buffer, 10, 2), [250, 255]],
      [view, [3, 4, 5, 6, 7]],
      [new Uint16Array([0x0102]), [...new Uint8Array(new Uint16Array([0x0102]).buffer)]],
      [pooled, [...pooled]],
      ['héllo ✓ 😀', [...Buffer.from('héllo ✓ 😀', 'utf8')]],
      ['', []],
      [new ArrayBuffer(0), []],
    ];
    for (const [body] of cases) await f.producer.send(target(), body);
    const sent = f.singles();
    expect(sent).toHaveLength(cases.length);
    cases.forEach(([, bytes], i) => {
      expect([...decoded(sent[i]?.MessageBody).body], `case ${i}`).toEqual(bytes);
    });
    expect(f.batches()).toHaveLength(0);
  });

  it('AQ-04 copies the body when send is called, so later changes by the caller are not sent', async () => {
    const f = fakes();
    const bytes = new Uint8Array([1, 2, 3]);
    const pending = f.producer.send(target(), bytes);
    bytes.fill(9);
    await pending;
    expect([...decoded(f.singles()[0]?.MessageBody).body]).toEqual([1, 2, 3]);
  });

  it('AQ-04 accepts 127000 bytes and rejects 127001 with message_too_large, strings counted in UTF-8 bytes', async () => {
    const f = fakes();
    await f.producer.send(target(), new Uint8Array(127_000));
    await f.producer.send(target(), new ArrayBuffer(127_000));
    await f.producer.send(target(), 'a'.repeat(127_000));
    await f.producer.send(target(), 'é'.repeat(63_500)); // 127000 UTF-8 bytes
    expect(f.singles()).toHaveLength(4);
    for (const s of f.singles()) expect(decoded(s.MessageBody).body.byteLength).toBe(127_000);

    await expectName(f.producer.send(target(), new Uint8Array(127_001)), 'message_too_large');
    await expectName(f.producer.send(target(), new ArrayBuffer(127_001)), 'message_too_large');
    await expectName(f.producer.send(target(), new DataView(new ArrayBuffer(127_001))), 'message_too_large');
    await expectName(f.producer.send(target(), 'a'.repeat(127_001)), 'message_too_large');
    await expectName(f.producer.send(target(), `${'é'.repeat(63_500)}a`), 'message_too_large');
    // 126999 characters but 127001 bytes: the limit is on bytes, not characters.
    const euro = `${'a'.repeat(126_998)}€`;
    expect(euro.length).toBe(126_999);
    await expectName(f.producer.send(target(), euro), 'message_too_large');
    await expectName(
      f.producer.sendBatch(target(), [{ body: 'x' }, { body: new Uint8Array(127_001) }]),
      'message_too_large',
    );
    expect(f.singles()).toHaveLength(4);
    expect(f.batches()).toHaveLength(0);
  });

  it('AQ-04 rejects anything that is not a body with invalid_body and sends nothing', async () => {
    const f = fakes();
    for (const body of [42, null, undefined, true, {}, { byteLength: 3 }, [1, 2, 3], Symbol('s'), 10n]) {
      await expectName(f.producer.send(target(), body), 'invalid_body');
    }
    await expectName(f.producer.sendBatch(target(), [{ body: 'ok' }, { body: 7 }]), 'invalid_body');
    await expectName(f.producer.sendBatch(target(), [{ delaySeconds: 1 }]), 'invalid_body');
    expect(f.events).toHaveLength(0);
  });
});

describe('QueueProducer.send: options and delays', () => {
  it('AQ-04 options is an optional closed {delaySeconds?}; other shapes are TypeErrors', async () => {
    const f = fakes();
    await f.producer.send(target(), 'a');
    await f.producer.send(target(), 'a', {});
    await f.producer.send(target(), 'a', { delaySeconds: undefined });
    await f.producer.send(target(), 'a', { delaySeconds: 5 });
    expect(f.singles().map((s) => s.DelaySeconds)).toEqual([0, 0, 0, 5]);
    for (const options of [null, 5, 'delay', [], [5], { delaySeconds: 5, extra: 1 }, { delay: 5 }]) {
      await expectTypeError(f.producer.send(target(), 'a', options));
    }
    await expectTypeError(f.producer.send(target(), 'a', { [Symbol('x')]: 1 }));
    expect(f.singles()).toHaveLength(4);
  });

  it('AQ-04 accepts delays 0..43200, caps SQS DelaySeconds at 900 and sets notBefore only past 900 s', async () => {
    const f = fakes();
    for (const d of [0, 900, 901, 43_200]) await f.producer.send(target(), 'a', { delaySeconds: d });
    const sent = f.singles();
    expect(sent.map((s) => s.DelaySeconds)).toEqual([0, 900, 900, 900]);
    const envelopes = sent.map((s) => decoded(s.MessageBody));
    expect(envelopes.map((e) => e.notBefore)).toEqual([
      undefined,
      undefined,
      NOW + 901_000,
      NOW + 43_200_000,
    ]);
    for (const e of envelopes) {
      expect(e.ts).toBe(NOW);
      expect(e.commit).toBeUndefined();
    }
  });

  it('AQ-04 refuses delays that are not integers in 0..43200 with a TypeError', async () => {
    const f = fakes();
    for (const d of [43_201, -1, 1.5, '5', null, Number.NaN, Number.POSITIVE_INFINITY, true, 5n]) {
      await expectTypeError(f.producer.send(target(), 'a', { delaySeconds: d }));
      await expectTypeError(f.producer.sendBatch(target(), [{ body: 'a', delaySeconds: d }]));
    }
    expect(f.events).toHaveLength(0);
  });

  it("AQ-04 applies the queue's deliveryDelaySeconds when a send names no delay, and an explicit 0 wins", async () => {
    const f = fakes();
    await f.producer.send(target({ defaultDelaySeconds: 1200 }), 'a');
    await f.producer.send(target({ defaultDelaySeconds: 1200 }), 'a', { delaySeconds: 0 });
    await f.producer.sendBatch(target({ defaultDelaySeconds: 30 }), [
      { body: 'a' },
      { body: 'b', delaySeconds: 2 },
    ]);
    const [first, second] = f.singles();
    expect(first?.DelaySeconds).toBe(900);
    expect(decoded(first?.MessageBody).notBefore).toBe(NOW + 1_200_000);
    expect(second?.DelaySeconds).toBe(0);
    expect(decoded(second?.MessageBody).notBefore).toBeUndefined();
    expect(f.entries().map((e) => e.DelaySeconds)).toEqual([30, 2]);
  });
});

describe('QueueProducer.sendBatch', () => {
  it('AQ-04 refuses an empty batch, a non-array, non-object items and unknown item fields with a TypeError', async () => {
    const f = fakes();
    for (const messages of [[], undefined, null, 'a', { body: 'a' }, 3]) {
      await expectTypeError(f.producer.sendBatch(target(), messages));
    }
    for (const item of ['a', 3, null, [{ body: 'a' }], new Uint8Array(1)]) {
      await expectTypeError(f.producer.sendBatch(target(), [{ body: 'ok' }, item]));
    }
    await expectTypeError(f.producer.sendBatch(target(), [{ body: 'a', extra: 1 }]));
    await expectTypeError(f.producer.sendBatch(target(), [{ body: 'a', delay: 1 }]));
    expect(f.events).toHaveLength(0);
  });

  it('AQ-04 refuses 101 messages with batch_too_large and sends nothing', async () => {
    const f = fakes();
    const messages = Array.from({ length: 101 }, (_, i) => ({ body: `m${i}` }));
    await expectName(f.producer.sendBatch(target(), messages), 'batch_too_large');
    expect(f.events).toHaveLength(0);
  });

  it('AQ-04 DL-07 a one-message batch is one SendMessage (sent at most once) with no commit', async () => {
    const f = fakes();
    const ids = await f.producer.sendBatch(target(), [{ body: 'only' }]);
    expect(ids).toEqual(['m0001']);
    expect(f.batches()).toHaveLength(0);
    const singles = f.events.filter((x) => x.kind === 'single');
    expect(singles).toHaveLength(1);
    const e = decoded((singles[0] as { input: { MessageBody?: string } }).input.MessageBody);
    expect(e).toMatchObject({ id: 'm0001', ts: NOW });
    expect(e.commit).toBeUndefined();
    expect(f.commitEvents()).toHaveLength(0);
  });

  it('AQ-04 100 messages go as 10 requests of 10, ids in input order, and one commit written after every entry', async () => {
    const f = fakes();
    const messages = Array.from({ length: 100 }, (_, i) => ({ body: `body-${i}` }));
    const ids = await f.producer.sendBatch(target(), messages);
    expect(ids).toHaveLength(100);
    expect(new Set(ids).size).toBe(100);
    expect(f.batches()).toHaveLength(10);
    for (const b of f.batches()) {
      expect(b.QueueUrl).toBe(target().sqsUrl);
      expect(b.Entries).toHaveLength(10);
    }
    const byId = new Map(f.entries().map((e) => [decoded(e.MessageBody).id, decoded(e.MessageBody)]));
    ids.forEach((id, i) => {
      const e = byId.get(id);
      expect(new TextDecoder().decode(e?.body)).toBe(`body-${i}`);
      expect(e?.ts).toBe(NOW);
      expect(e?.commit).toBe('c-commit-1');
    });
    const commits = f.commitEvents();
    expect(commits).toEqual([
      {
        kind: 'commit',
        id: 'c-commit-1',
        expiresAt: Math.ceil(NOW / 1000) + MAX_RETENTION_SECONDS + 43_200 + 86_400,
      },
    ]);
    expect(f.events.at(-1)?.kind).toBe('commit');
  });

  it('AQ-04 splits requests so no SendMessageBatch carries more than 256 KiB of bodies', async () => {
    const f = fakes();
    const big = new Uint8Array(127_000).fill(7);
    await f.producer.sendBatch(target(), [{ body: big }, { body: big }, { body: 'small' }, { body: big }]);
    for (const b of f.batches()) {
      const bytes = (b.Entries ?? []).reduce((n, e) => n + Buffer.byteLength(e.MessageBody ?? ''), 0);
      expect(bytes).toBeLessThanOrEqual(262_144);
    }
    expect(f.entries()).toHaveLength(4);
    expect(f.batches().length).toBeGreaterThanOrEqual(3);
    expect(f.commitEvents()).toHaveLength(1);
  });

  it('AQ-04 resends entries SQS reported as failed, with the same envelope, then commits', async () => {
    const f = fakes({ failEntry: (call, e) => call === 1 && (e.Id === 'e3' || e.Id === 'e7') });
    const ids = await f.producer.sendBatch(
      target(),
      Array.from({ length: 10 }, (_, i) => ({ body: `b${i}` })),
    );
    const [first, retry] = f.batches();
    expect(f.batches()).toHaveLength(2);
    expect(retry?.Entries?.map((e) => e.Id)).toEqual(['e3', 'e7']);
    expect(retry?.Entries?.map((e) => e.MessageBody)).toEqual(
      first?.Entries?.filter((e) => e.Id === 'e3' || e.Id === 'e7').map((e) => e.MessageBody),
    );
    expect(ids).toHaveLength(10);
    expect(f.commitEvents()).toHaveLength(1);
    expect(f.events.at(-1)?.kind).toBe('commit');
  });

  it('AQ-04 a partial failure that persists rejects backend_unavailable after a bounded number of tries and writes no commit', async () => {
    const f = fakes({ failEntry: (_call, e) => e.Id === 'e12' });
    await expectName(
      f.producer.sendBatch(
        target(),
        Array.from({ length: 20 }, (_, i) => ({ body: `b${i}` })),
      ),
      'backend_unavailable',
    );
    const retries = f.batches().filter((b) => b.Entries?.length === 1);
    expect(retries.length).toBeGreaterThanOrEqual(1);
    expect(retries.length).toBeLessThanOrEqual(5);
    for (const r of retries) expect(r.Entries?.[0]?.Id).toBe('e12');
    expect(f.commitEvents()).toHaveLength(0);
  });

  it('AQ-04 an SQS error rejects backend_unavailable for send and sendBatch, with no commit', async () => {
    const f = fakes({ throwOn: () => true });
    await expectName(f.producer.send(target(), 'a'), 'backend_unavailable');
    await expectName(f.producer.sendBatch(target(), [{ body: 'a' }, { body: 'b' }]), 'backend_unavailable');
    expect(f.commitEvents()).toHaveLength(0);
  });

  it('AQ-04 a commit write that keeps failing rejects backend_unavailable; one that recovers resolves', async () => {
    const failing = fakes({ commitFailures: 100 });
    await expectName(
      failing.producer.sendBatch(target(), [{ body: 'a' }, { body: 'b' }]),
      'backend_unavailable',
    );
    expect(failing.commitEvents()).toHaveLength(0);
    const flaky = fakes({ commitFailures: 1 });
    expect(await flaky.producer.sendBatch(target(), [{ body: 'a' }, { body: 'b' }])).toHaveLength(2);
    expect(flaky.commitEvents()).toHaveLength(1);
  });

  it('AQ-04 writes no commit once the commit deadline after acceptance passed, and rejects backend_unavailable', async () => {
    let now = NOW;
    const f = fakes({
      clock: () => now,
      // SQS is slow: by the time every entry is accepted the deadline has passed.
      failEntry: () => {
        now += COMMIT_DEADLINE_MS;
        return false;
      },
    });
    await expectName(f.producer.sendBatch(target(), [{ body: 'a' }, { body: 'b' }]), 'backend_unavailable');
    expect(f.entries()).toHaveLength(2);
    expect(f.commitEvents()).toHaveLength(0);
  });

  it('AQ-04 never writes message bodies to the logs', async () => {
    const lines: string[] = [];
    vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => {
      lines.push(String(chunk));
      return true;
    });
    const f = fakes({ throwOn: () => true });
    const secret = 'SECRET-BODY-TEXT';
    await expectName(f.producer.send(target(), secret), 'backend_unavailable');
    await expectName(
      f.producer.sendBatch(target(), [{ body: secret }, { body: secret }]),
      'backend_unavailable',
    );
    const logged = lines.join('');
    expect(logged).toContain('queue send failed');
    expect(logged).not.toContain(secret);
    expect(logged).not.toContain(Buffer.from(secret).toString('base64'));
  });
});

describe('QueueProducer ids', () => {
  it('AQ-04 default message ids are unique, 1..256 characters, sortable by acceptance time', async () => {
    let now = NOW;
    const sent: string[] = [];
    const producer = new QueueProducer({
      messages: sqsMessageQueue({
        send: async (c: unknown) => {
          if (c instanceof SendMessageBatchCommand) {
            for (const e of c.input.Entries ?? []) sent.push(e.MessageBody ?? '');
            return { Successful: (c.input.Entries ?? []).map((e) => ({ Id: e.Id })), Failed: [] };
          }
          return { MessageId: 'x' };
        },
      } as unknown as SQSClient),
      commits: { putCommit: async () => {}, committed: async () => new Set() },
      clock: () => now,
    });
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      ids.push(...(await producer.sendBatch(target(), [{ body: 'a' }, { body: 'b' }, { body: 'c' }])));
      now += 1;
    }
    expect(new Set(ids).size).toBe(15);
    for (const id of ids) {
      expect(id.length).toBeGreaterThanOrEqual(1);
      expect(id.length).toBeLessThanOrEqual(256);
      expect(id).toMatch(/^m[0-9A-Z]+$/);
    }
    const firstOfEach = [0, 3, 6, 9, 12].map((i) => ids[i] as string);
    expect([...firstOfEach].sort()).toEqual(firstOfEach);
    // Commit ids differ per send, and every envelope names its send's commit.
    const commits = sent.map((t) => decoded(t).commit);
    expect(new Set(commits).size).toBe(5);
    expect(commits.every((c) => typeof c === 'string' && c.length >= 16)).toBe(true);
  });
});
