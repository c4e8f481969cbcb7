/**
 * Issue 12: the worker runtime's batch-host transport on AWS. A Lambda throttle (429: the
 * function did not run) is tried again for a bounded time; anything after which the function may
 * have run is not. `settleMany` answers one result per call, and the request is bounded.
 */
import { type InvokeCommand, TooManyRequestsException } from '@aws-sdk/client-lambda';
import { describe, expect, it } from 'vitest';
import { batchHostRequestSchema } from '../../../lambdas/delivery/batch-host-protocol.ts';
import type { Received, Slot } from '../../../lambdas/delivery/delivery-service.ts';
import { SETTLE_GROUP_LIMIT } from '../../../lambdas/delivery/settlement-protocol.ts';
import {
  type BatchHostTransport,
  DEFAULT_THROTTLE_RETRY,
  HOST_CALL_RESERVE_MS,
  hostCallDeadlines,
  lambdaTransport,
  remoteBatchHost,
} from '../../../lambdas/worker-runtime/remote-batch-host.ts';
import { slot as SLOT_FIXTURE } from './slot-fixture.ts';

const throttle = () =>
  new TooManyRequestsException({
    message: 'Rate Exceeded.',
    Reason: 'ConcurrentInvocationLimitExceeded',
    Type: 'User',
    $metadata: { httpStatusCode: 429 },
  });
const answer = (value: unknown) => ({
  StatusCode: 200,
  Payload: new TextEncoder().encode(JSON.stringify({ ok: true, value })),
});

/** A Lambda client that gives `outcomes` in turn (an Error is thrown), recording the requests. */
function fakeLambda(outcomes: (Error | Record<string, unknown>)[], fallback?: () => Error) {
  const requests: unknown[] = [];
  return {
    requests,
    client: {
      send: async (command: InvokeCommand) => {
        requests.push(JSON.parse(new TextDecoder().decode(command.input.Payload as Uint8Array)));
        const next = outcomes.shift() ?? fallback?.();
        if (next instanceof Error) throw next;
        return next;
      },
    } as unknown as Parameters<typeof lambdaTransport>[0],
  };
}

/** Records the waits instead of waiting. */
function fakeSleep() {
  const waits: number[] = [];
  return { waits, sleep: async (ms: number) => void waits.push(ms) };
}

const outcome = (p: Promise<unknown>) =>
  p.then(
    () => 'resolved',
    (err: Error) => err.name,
  );

describe('lambdaTransport: throttles (issue 12)', () => {
  it('DL-03 a settle throttled twice is sent again and resolves', async () => {
    const lambda = fakeLambda([throttle(), throttle(), answer(null)]);
    const s = fakeSleep();
    const host = remoteBatchHost(
      lambdaTransport(lambda.client, 'batch-host', {
        budgetMs: 5_000,
        baseMs: 100,
        capMs: 1_000,
        sleep: s.sleep,
      }),
    );
    expect(await outcome(host.settle('b-1', 'cred', { kind: 'ack', index: 0 }))).toBe('resolved');
    expect(lambda.requests).toHaveLength(3);
    // Full jitter below 100 ms, then below 200 ms.
    expect(s.waits).toHaveLength(2);
    expect(s.waits[0]).toBeLessThanOrEqual(100);
    expect(s.waits[1]).toBeLessThanOrEqual(200);
  });

  it('DL-08 a settle that keeps being throttled rejects backend_unavailable once the bounded time is spent', async () => {
    const lambda = fakeLambda([], throttle);
    const s = fakeSleep();
    const host = remoteBatchHost(
      lambdaTransport(lambda.client, 'batch-host', {
        budgetMs: 3_000,
        baseMs: 100,
        capMs: 1_000,
        sleep: s.sleep,
        random: () => 1, // the longest waits: 100, 200, 400, 800, 1000 … within 3 s
      }),
    );
    expect(await outcome(host.settle('b-1', 'cred', { kind: 'ack', index: 0 }))).toBe('backend_unavailable');
    expect(s.waits).toEqual([100, 200, 400, 800, 1_000]);
    expect(s.waits.reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(3_000);
    expect(lambda.requests).toHaveLength(6);
  });

  it('DL-08 a FunctionError or a failed request is not sent again (the function may have run)', async () => {
    const functionError = fakeLambda([
      { StatusCode: 200, FunctionError: 'Unhandled', Payload: new Uint8Array() },
    ]);
    const s = fakeSleep();
    const viaError = remoteBatchHost(
      lambdaTransport(functionError.client, 'batch-host', {
        budgetMs: 5_000,
        baseMs: 100,
        capMs: 1_000,
        sleep: s.sleep,
      }),
    );
    expect(await outcome(viaError.settle('b-1', 'cred', { kind: 'ack', index: 0 }))).toBe(
      'backend_unavailable',
    );
    expect(functionError.requests).toHaveLength(1);

    const lost = fakeLambda([Object.assign(new Error('socket hang up'), { name: 'TimeoutError' })]);
    const viaLoss = remoteBatchHost(
      lambdaTransport(lost.client, 'batch-host', {
        budgetMs: 5_000,
        baseMs: 100,
        capMs: 1_000,
        sleep: s.sleep,
      }),
    );
    expect(await outcome(viaLoss.settle('b-1', 'cred', { kind: 'ack', index: 0 }))).toBe(
      'backend_unavailable',
    );
    expect(lost.requests).toHaveLength(1);
    expect(s.waits).toEqual([]);
  });
});

describe('lambdaTransport: throttles are waited out within the call’s own time limits', () => {
  /** A clock that the fake sleep moves forward. */
  function fakeTime(start: number) {
    const t = { now: start, waits: [] as number[] };
    return {
      t,
      clock: () => t.now,
      sleep: async (ms: number) => {
        t.waits.push(ms);
        t.now += ms;
      },
    };
  }
  const T0 = 1_700_000_000_000;
  const slotUntil = (deadline: number) => ({ batchId: 'b-9', deadline }) as unknown as Slot;

  it('a throttle lasting 20 s no longer fails the call: it is waited out and the call resolves', async () => {
    const time = fakeTime(T0);
    // Throttled for 20 s of the fake clock, then answered.
    const lambda = fakeLambda([], () => throttle());
    const send = lambda.client.send;
    lambda.client.send = (async (command: InvokeCommand) =>
      time.t.now - T0 >= 20_000
        ? answer({ applied: true })
        : send(command)) as unknown as typeof lambda.client.send;
    const host = remoteBatchHost(
      lambdaTransport(lambda.client, 'batch-host', {
        ...DEFAULT_THROTTLE_RETRY,
        until: hostCallDeadlines(T0 + 600_000),
        clock: time.clock,
        sleep: time.sleep,
      }),
    );
    expect(await outcome(host.finalize(slotUntil(T0 + 300_000), 'cred', 'returned'))).toBe('resolved');
    expect(time.t.now - T0).toBeGreaterThanOrEqual(20_000);
    // Before: 3 s of waits, then backend_unavailable.
    expect(Math.max(...time.t.waits)).toBeLessThanOrEqual(DEFAULT_THROTTLE_RETRY.capMs);
  });

  it('never waits past the slot’s deadline: a call about its batch gives up before it', async () => {
    const time = fakeTime(T0);
    const lambda = fakeLambda([], throttle);
    const until = hostCallDeadlines(T0 + 600_000);
    const host = remoteBatchHost(
      lambdaTransport(lambda.client, 'batch-host', {
        ...DEFAULT_THROTTLE_RETRY,
        until,
        clock: time.clock,
        sleep: time.sleep,
      }),
    );
    const deadline = T0 + 30_000;
    expect(await outcome(host.finalize(slotUntil(deadline), 'cred', 'returned'))).toBe('backend_unavailable');
    expect(time.t.now).toBeLessThanOrEqual(deadline - HOST_CALL_RESERVE_MS);
    expect(time.t.now).toBeGreaterThan(deadline - HOST_CALL_RESERVE_MS - DEFAULT_THROTTLE_RETRY.capMs);
    // A settle of that batch (no slot in the request) is bounded by the same deadline.
    time.t.now = deadline - 5_000;
    expect(await outcome(host.settle('b-9', 'cred', { kind: 'ack', index: 0 }))).toBe('backend_unavailable');
    expect(time.t.now).toBeLessThanOrEqual(deadline - HOST_CALL_RESERVE_MS);
  });

  it('never waits past the invocation’s end, nor a registration past its messages’ hidden time', async () => {
    const time = fakeTime(T0);
    const lambda = fakeLambda([], throttle);
    const host = remoteBatchHost(
      lambdaTransport(lambda.client, 'batch-host', {
        ...DEFAULT_THROTTLE_RETRY,
        until: hostCallDeadlines(T0 + 10_000),
        clock: time.clock,
        sleep: time.sleep,
      }),
    );
    expect(await outcome(host.finalize(slotUntil(T0 + 300_000), 'cred', 'returned'))).toBe(
      'backend_unavailable',
    );
    expect(time.t.now).toBeLessThanOrEqual(T0 + 10_000 - HOST_CALL_RESERVE_MS);

    time.t.now = T0;
    const regLambda = fakeLambda([], throttle);
    const reg = remoteBatchHost(
      lambdaTransport(regLambda.client, 'batch-host', {
        ...DEFAULT_THROTTLE_RETRY,
        until: hostCallDeadlines(T0 + 600_000),
        clock: time.clock,
        sleep: time.sleep,
      }),
      { registerRetry: { tries: 1, withinMs: 0, baseMs: 0 } },
    );
    const received = [
      { messageId: 'm', receiptHandle: 'r', receiveCount: 1, body: 'x' },
    ] as unknown as Received[];
    expect(await outcome(reg.register(slotUntil(T0 + 300_000), received, { visibleForMs: 8_000 }))).toBe(
      'backend_unavailable',
    );
    expect(time.t.now).toBeLessThanOrEqual(T0 + 8_000 - HOST_CALL_RESERVE_MS);
  });
});

describe('remoteBatchHost.settleMany (issue 12)', () => {
  const calls = [
    { kind: 'ack', index: 0 },
    { kind: 'retry', index: 1, delaySeconds: 5 },
    { kind: 'ackAll' },
  ] as const;

  it('sends one settleMany request and returns one answer per call; unlisted answers count as backend_unavailable', async () => {
    const sent: unknown[] = [];
    const transport: BatchHostTransport = async (request) => {
      sent.push(request);
      return { ok: true, value: ['ok', 'already_settled', 'something_else'] };
    };
    expect(await remoteBatchHost(transport).settleMany('b-1', 'cred', [...calls])).toEqual([
      'ok',
      'already_settled',
      'backend_unavailable',
    ]);
    expect(sent).toEqual([{ action: 'settleMany', batchId: 'b-1', credential: 'cred', calls }]);
  });

  it('DL-08 an answer of the wrong length rejects backend_unavailable', async () => {
    const transport: BatchHostTransport = async () => ({ ok: true, value: ['ok'] });
    expect(await outcome(remoteBatchHost(transport).settleMany('b-1', 'cred', [...calls]))).toBe(
      'backend_unavailable',
    );
  });

  it('the protocol takes 1 to SETTLE_GROUP_LIMIT valid calls', () => {
    const request = (n: number) => ({
      action: 'settleMany',
      batchId: 'b-1',
      credential: 'cred',
      calls: Array.from({ length: n }, (_, index) => ({ kind: 'ack', index })),
    });
    expect(batchHostRequestSchema.safeParse(request(SETTLE_GROUP_LIMIT)).success).toBe(true);
    expect(batchHostRequestSchema.safeParse(request(SETTLE_GROUP_LIMIT + 1)).success).toBe(false);
    expect(batchHostRequestSchema.safeParse(request(0)).success).toBe(false);
    expect(
      batchHostRequestSchema.safeParse({ ...request(1), calls: [{ kind: 'ack', index: -1 }] }).success,
    ).toBe(false);
  });
});

describe('remoteBatchHost.register: a registration the batch host did not answer is sent again', () => {
  const slot = { batchId: 'b-1' } as unknown as Slot;
  const received: Received[] = [{ receiptHandle: 'h-1', receivedAt: 1, envelope: { id: 'm-1', ts: 1 } }];
  const registration = { credential: 'cred', deadline: 5, deliver: [{ received: 0, attempts: 1 }], moves: 0 };
  const reset = () => Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' });
  const functionError = { StatusCode: 200, FunctionError: 'Unhandled', Payload: new Uint8Array() };
  const refused = (name: string) => ({
    StatusCode: 200,
    Payload: new TextEncoder().encode(JSON.stringify({ ok: false, error: { name, message: 'no' } })),
  });
  /** A remote host over `lambda` whose waits are recorded, and whose clock the test moves. */
  const hostOver = (lambda: ReturnType<typeof fakeLambda>, clock = () => 0) => {
    const s = fakeSleep();
    const host = remoteBatchHost(lambdaTransport(lambda.client, 'batch-host'), {
      registerRetry: { tries: 3, withinMs: 2_000, baseMs: 100, sleep: s.sleep, clock },
    });
    return { host, waits: s.waits };
  };

  it('DL-07 a register whose answer was lost (a reset connection, then a FunctionError) is sent again as it was, and the repeat’s answer is the registration', async () => {
    const lambda = fakeLambda([reset(), functionError, answer(registration)]);
    const { host, waits } = hostOver(lambda);
    expect(await host.register(slot, received)).toEqual(registration);
    expect(lambda.requests).toHaveLength(3);
    expect(lambda.requests[1]).toEqual(lambda.requests[0]);
    expect(lambda.requests[2]).toEqual(lambda.requests[0]);
    expect(waits).toEqual([100, 200]);
  });

  it('DL-07 a register the batch host answered is not sent again (a refusal, or its own backend_unavailable after it gave the messages back)', async () => {
    for (const name of ['unknown_batch', 'backend_unavailable']) {
      const lambda = fakeLambda([refused(name), answer(registration)]);
      expect(await outcome(hostOver(lambda).host.register(slot, received))).toBe(name);
      expect(lambda.requests).toHaveLength(1);
    }
  });

  it('DL-07 the repeats are bounded: three tries, each begun within 2 s of the first', async () => {
    const always = fakeLambda([], reset);
    expect(await outcome(hostOver(always).host.register(slot, received))).toBe('backend_unavailable');
    expect(always.requests).toHaveLength(3);
    // The first try took 1.95 s to fail: a repeat would begin past the window.
    let now = 0;
    const slow = fakeLambda([], () => {
      now += 1_950;
      return reset();
    });
    expect(await outcome(hostOver(slow, () => now).host.register(slot, received))).toBe(
      'backend_unavailable',
    );
    expect(slow.requests).toHaveLength(1);
  });

  it('DL-03 a settle, a group of settle calls and a finalize whose answer was lost are never sent again here', async () => {
    const lambda = fakeLambda([], reset);
    const { host } = hostOver(lambda);
    expect(await outcome(host.settle('b-1', 'cred', { kind: 'ack', index: 0 }))).toBe('backend_unavailable');
    expect(await outcome(host.settleMany('b-1', 'cred', [{ kind: 'ack', index: 0 }]))).toBe(
      'backend_unavailable',
    );
    expect(await outcome(host.finalize(slot, 'cred', 'returned'))).toBe('backend_unavailable');
    expect(lambda.requests).toHaveLength(3);
  });
});

describe('remoteBatchHost.defer: bodies of messages due much later', () => {
  const slot = SLOT_FIXTURE as unknown as Slot;
  const item = (id: string, bytes: number) => ({
    receiptHandles: [`h-${id}`],
    id,
    ts: 1,
    notBefore: 2,
    body: new Uint8Array(bytes).fill(7),
  });

  it('sends them base64 in requests the protocol accepts, split under the payload limit', async () => {
    const sent: unknown[] = [];
    const transport: BatchHostTransport = async (request) => {
      sent.push(request);
      return { ok: true, value: { deferred: 1 } };
    };
    // 60 bodies of 120,000 bytes: about 9.6 MB of base64, more than one invocation carries.
    await remoteBatchHost(transport).defer(
      slot,
      Array.from({ length: 60 }, (_, i) => item(`m${i}`, 120_000)),
    );
    expect(sent.length).toBeGreaterThan(1);
    for (const request of sent) {
      expect(batchHostRequestSchema.safeParse(request).success).toBe(true);
      expect(Buffer.byteLength(JSON.stringify(request))).toBeLessThan(6 * 1024 * 1024);
    }
    const ids = sent.flatMap((r) => (r as { items: { id: string }[] }).items.map((i) => i.id));
    expect(ids).toEqual(Array.from({ length: 60 }, (_, i) => `m${i}`));
  });

  it('the protocol refuses a body past the Form’s 127,000 bytes and more than 100 items', () => {
    const wire = (bytes: number) => ({
      ...item('m', 0),
      body: Buffer.alloc(bytes, 7).toString('base64'),
    });
    const request = (items: unknown[]) => ({ action: 'defer', slot, items });
    expect(batchHostRequestSchema.safeParse(request([wire(127_000)])).success).toBe(true);
    expect(batchHostRequestSchema.safeParse(request([wire(127_003)])).success).toBe(false);
    expect(
      batchHostRequestSchema.safeParse(request(Array.from({ length: 101 }, () => wire(1)))).success,
    ).toBe(false);
  });
});
