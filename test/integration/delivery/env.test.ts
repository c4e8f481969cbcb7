/**
 * MW-03: `queue(batch, env, ctx)` receives a frozen batch with `batchId`, `queue` (the queue
 * Resource's name) and `messages[]` of `{id, timestampMillis, body: Uint8Array copy, attempts}`;
 * `env` holds exactly the declared vars and producer bindings; `ctx.waitUntil` keeps the
 * invocation alive until its promise settles.
 */
import { ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { decodeEnvelope } from '../../../lambdas/delivery/envelope.ts';
import {
  createDeliveryHost,
  type DeliveryHost,
  recordingWorker,
  waitFor,
} from '../../support/delivery-harness.ts';
import {
  allEnded,
  attemptsById,
  batchHead,
  consumerOn,
  queueCounts,
  type Rec,
  raiseFlag,
  records,
  serial,
  sleep,
  waitDrained,
  waitForFlag,
} from './delivery-kit.ts';

/** Worker JS recording what the handler sees of `batch`, `env` and `ctx`. */
const INSPECT = `
  const m = batch.messages[0];
  const attempt = (f) => { try { f(); return 'no error'; } catch (e) { return e.name; } };
  rec({
    ev: 'seen',
    envOwnKeys: Reflect.ownKeys(env).map(String).sort(),
    envKeys: Object.keys(env).sort(),
    envFrozen: Object.isFrozen(env),
    vars: Object.fromEntries(Object.keys(env).filter((k) => typeof env[k] !== 'object' || !('send' in env[k])).map((k) => [k, env[k]])),
    bindingKeys: env.OUT ? Reflect.ownKeys(env.OUT).map(String).sort() : null,
    batchKeys: Reflect.ownKeys(batch).map(String).sort(),
    batchFrozen: Object.isFrozen(batch),
    messagesFrozen: Object.isFrozen(batch.messages),
    messageFrozen: Object.isFrozen(m),
    messageKeys: Reflect.ownKeys(m).map(String).sort(),
    batchIdLength: batch.batchId.length,
    queue: batch.queue,
    id: m.id,
    timestampMillis: m.timestampMillis,
    bodyIsUint8Array: m.body instanceof Uint8Array,
    bodyOwnsBuffer: m.body.byteOffset === 0 && m.body.buffer.byteLength === m.body.byteLength,
    setQueue: attempt(() => { batch.queue = 'other'; }),
    pushMessage: attempt(() => { batch.messages.push(m); }),
    setAttempts: attempt(() => { m.attempts = 9; }),
    ctxKeys: Reflect.ownKeys(ctx).map(String),
    ctxFrozen: Object.isFrozen(ctx),
  });`;

describe.concurrent('MW-03 what a queue handler receives', () => {
  let d: DeliveryHost;
  beforeAll(async () => {
    d = await createDeliveryHost();
    d.startDispatcher();
  });
  afterAll(async () => d.close());

  it('MW-03 AQ-04 env has exactly the vars and producer bindings; a binding sends to another queue; batch is frozen and names the queue', async ({
    expect,
  }) => {
    const log = d.logFile('env');
    const vars = { GREETING: 'hello', LIMIT: 3, FLAGS: { on: [1, 2] } };
    const { queue, out } = await serial(async () => {
      const q = await d.createQueue('team', 'env-in');
      const o = await d.createQueue('team', 'env-out');
      await consumerOn(
        d,
        'env',
        q,
        recordingWorker(
          log,
          `${INSPECT}
          const fid = await env.OUT.send('fwd:' + new TextDecoder().decode(m.body));
          rec({ ev: 'forwarded', id: fid });
          try { await env.OUT.send(new Uint8Array(127001)); rec({ ev: 'too large', name: 'resolved' }); }
          catch (e) { rec({ ev: 'too large', name: e.name }); }`,
        ),
        {},
        { vars, queueProducers: { OUT: { queue: 'env-out' } } },
      );
      return { queue: q, out: o };
    });
    const before = Date.now();
    const id = await d.host.producer.send(queue, 'payload');
    const after = Date.now();
    await waitDrained(d, queue);
    const events = await waitFor('handler ended', () => {
      const e = records(log);
      return allEnded(e) && e.some((x) => x.ev === 'end') ? e : undefined;
    });
    const seen = events.find((e) => e.ev === 'seen') as Rec;
    expect(seen.envOwnKeys).toEqual(['FLAGS', 'GREETING', 'LIMIT', 'OUT']);
    expect(seen.envKeys).toEqual(['FLAGS', 'GREETING', 'LIMIT', 'OUT']);
    expect(seen.vars).toEqual(vars);
    expect(seen.bindingKeys).toEqual(['send', 'sendBatch']);
    expect(seen.batchKeys).toEqual([
      'acknowledge',
      'acknowledgeAll',
      'batchId',
      'messages',
      'queue',
      'retry',
      'retryAll',
    ]);
    expect(seen).toMatchObject({
      batchFrozen: true,
      messagesFrozen: true,
      messageFrozen: true,
      messageKeys: ['attempts', 'body', 'id', 'timestampMillis'],
      queue: 'env-in',
      id,
      bodyIsUint8Array: true,
      bodyOwnsBuffer: true,
      setQueue: 'TypeError',
      pushMessage: 'TypeError',
      setAttempts: 'TypeError',
      ctxKeys: ['waitUntil'],
      ctxFrozen: true,
    });
    expect(seen.batchIdLength).toBeGreaterThanOrEqual(1);
    expect(seen.batchIdLength).toBeLessThanOrEqual(256);
    expect(seen.timestampMillis).toBeGreaterThanOrEqual(before);
    expect(seen.timestampMillis).toBeLessThanOrEqual(after);
    expect(events.find((e) => e.ev === 'too large')?.name).toBe('message_too_large');

    // The binding's message is on the other queue (no consumer there): read it with the SDK.
    const forwarded = events.find((e) => e.ev === 'forwarded')?.id as string;
    const got = await waitFor('the forwarded message', async () => {
      const r = await d.host.sqs.send(
        new ReceiveMessageCommand({ QueueUrl: out.sqsUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 1 }),
      );
      return r.Messages?.length ? r.Messages : undefined;
    });
    expect(got).toHaveLength(1);
    const envelope = decodeEnvelope(got[0]?.Body);
    expect(envelope?.id).toBe(forwarded);
    expect(new TextDecoder().decode(envelope?.body)).toBe('fwd:payload');
  });

  it('MW-03 a worker that declares nothing gets an empty env', async ({ expect }) => {
    const log = d.logFile('bare');
    const { queue } = await serial(() => d.setup('bare', recordingWorker(log, INSPECT)));
    await d.host.producer.send(queue, 'x');
    await waitDrained(d, queue);
    const seen = await waitFor('recorded', () => records(log).find((e) => e.ev === 'seen'));
    expect(seen.envOwnKeys).toEqual([]);
    expect(seen.envFrozen).toBe(true);
    expect(seen.queue).toBe('bare-q');
  });

  it('MW-03 ctx.waitUntil keeps the invocation (and its batch) open after the handler returned, until the promise settles', async ({
    expect,
  }) => {
    const log = d.logFile('linger');
    const flag = `${log}.go`;
    const { queue } = await serial(() =>
      d.setup(
        'linger',
        recordingWorker(
          log,
          `const m = batch.messages[0];
          ctx.waitUntil((async () => {
            ${waitForFlag(flag)}
            try { await batch.acknowledge(m.id); rec({ ev: 'late ack', name: 'resolved' }); }
            catch (e) { rec({ ev: 'late ack', name: e.name }); }
          })());`,
        ),
      ),
    );
    const id = await d.host.producer.send(queue, 'linger');
    const returned = await waitFor('the handler returned', () => records(log).find((e) => e.ev === 'end'));
    await sleep(500);
    // The handler returned half a second ago, yet its batch is still open and its message unsettled.
    const open = await batchHead(d, returned.batch as string);
    expect(open?.closed).toBe(false);
    expect(open?.settled).toEqual({});
    expect((await queueCounts(d, queue)).inFlight).toBe(1);

    raiseFlag(flag);
    await waitDrained(d, queue);
    const events = records(log);
    expect(events.find((e) => e.ev === 'late ack')?.name).toBe('resolved');
    const closed = await batchHead(d, returned.batch as string);
    expect(closed?.closed).toBe(true);
    expect(closed?.outcome).toBe('returned');
    expect(closed?.settled).toEqual({ '0': 'a' });
    expect(attemptsById(events).get(id)).toEqual([1]);
  });
});
