/**
 * Issue 11, item 12: recovery evidence with real handlers and the Host's default delivery
 * settings.
 *
 * - QC-08: a consumer is deleted while a real handler (a worker thread) runs its batch. The
 *   delete Operation waits; nothing unsettled is acknowledged; when the handler ends, the
 *   Operation completes and exactly the unsettled messages stay on the queue.
 * - DL-07, RC-01, QC-08 at the Host's default delivery settings (worker timeout 900 s, grace and
 *   slot margin as the local Host derives them). Where the default timings would mean minutes
 *   of waiting, the Host's clock is injected and moved forward; SQS's own visibility timers run
 *   on real time in the stand-in, so "SQS time passing" is produced by making the messages the
 *   runner received visible again — only after the Host's clock has passed the slot deadline
 *   and recovery has run, which is what the grace guarantees on a real SQS.
 *
 * Not default: the harness fixes the lanes' idle wait at 1 s (the local Host's default is 10 s),
 * for the Host's slot deadlines and the dispatcher's receives alike.
 */
import { ChangeMessageVisibilityCommand, ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { decodeEnvelope } from '../../../lambdas/delivery/envelope.ts';
import type { QueueTarget } from '../../../lambdas/delivery/ports.ts';
import { deliveryTuning } from '../../../lambdas/local/delivery-tuning.ts';
import {
  createDeliveryHost,
  type DeliveryHost,
  recordingWorker,
  waitFor,
} from '../../support/delivery-harness.ts';
import {
  allEnded,
  attemptsById,
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

/** The local Host's default worker timeout (`--worker-timeout`, lambdas/local/config.ts). */
const DEFAULT_WORKER_TIMEOUT_MS = 900_000;
/**
 * The grace exactly as the local Host derives it with no overrides (60 s for a 900 s worker
 * timeout). The slot margin is the delivery service's own default (30 s, as the local Host's),
 * since the harness passes none.
 */
const DEFAULT_TUNING = deliveryTuning({}, DEFAULT_WORKER_TIMEOUT_MS / 1000);
const DEFAULTS = { workerTimeoutMs: DEFAULT_WORKER_TIMEOUT_MS, graceMs: DEFAULT_TUNING.graceMs };
/**
 * Shortened grace; the worker timeout stays long enough for the QC-08 test's three rounds while
 * its handler runs (on a loaded emulator each round took ~2 s, and a 10 s timeout cut the handler
 * off mid-test — then the delete rightly completed early).
 */
const SHORTENED = { workerTimeoutMs: 60_000, graceMs: 1_000 };

const TERMINAL = ['succeeded', 'failed', 'cancelled'];
const text = (b64: unknown) => Buffer.from(b64 as string, 'base64').toString();

/** JavaScript for a worker body: the message whose body is `wanted`. */
const byBody = (wanted: string) =>
  `batch.messages.find((m) => new TextDecoder().decode(m.body) === ${JSON.stringify(wanted)})`;

/** DELETE through the Host API at the Resource's current generation; returns the Operation id. */
async function deleteResource(d: DeliveryHost, uid: string): Promise<string> {
  const current = await d.host.request({ path: `/resources/${uid}` });
  if (current.status !== 200) throw new Error(`resource ${uid} answered ${current.status}`);
  const del = await d.host.request({
    method: 'DELETE',
    path: `/resources/${uid}`,
    headers: {
      'idempotency-key': d.host.newKey(),
      'takoform-expected-generation': String(current.body.generation),
    },
  });
  if (del.status !== 202) throw new Error(`delete answered ${del.status}: ${JSON.stringify(del.body)}`);
  return del.body.id as string;
}

const operation = async (d: DeliveryHost, id: string) =>
  (await d.host.request({ path: `/operations/${id}` })).body as { status: string; effect: string };

/** Runs the executor until the Operation is terminal (each probe is one executor pass). */
function operationEnds(d: DeliveryHost, id: string, timeoutMs = 20_000) {
  return waitFor(
    `operation ${id} terminal`,
    async () => {
      await d.host.settle();
      const op = await operation(d, id);
      return TERMINAL.includes(op.status) ? op : undefined;
    },
    timeoutMs,
  );
}

/**
 * Every message SQS holds for the queue, read straight from the SQS stand-in (no consumer is
 * attached any more): waits until SQS counts `expected` visible and nothing in flight, then
 * receives them all (hidden for a minute so none is read twice) and returns their Host ids.
 */
async function messagesOnQueue(d: DeliveryHost, queue: QueueTarget, expected: number): Promise<string[]> {
  await waitFor(`${expected} messages visible on ${queue.queueName}`, async () => {
    const c = await queueCounts(d, queue);
    return c.visible + c.delayed === expected && c.inFlight === 0;
  });
  const ids: string[] = [];
  for (;;) {
    const out = await d.host.sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: queue.sqsUrl,
        MaxNumberOfMessages: 10,
        WaitTimeSeconds: 1,
        VisibilityTimeout: 60,
      }),
    );
    const got = out.Messages ?? [];
    if (got.length === 0) break;
    for (const m of got) ids.push(decodeEnvelope(m.Body)?.id ?? `raw:${m.MessageId}`);
  }
  return ids.sort();
}

/**
 * Records the receipt handles of every receive the runners make on `sqs`, so a test can make
 * those messages visible again as SQS would once their visibility timeout ran out.
 */
function recordReceipts(d: DeliveryHost) {
  const received: { url: string; handle: string; id: string | undefined }[] = [];
  d.host.sqs.middlewareStack.add(
    (next, context) => async (args) => {
      const result = await next(args);
      if (context.commandName === 'ReceiveMessageCommand') {
        const url = (args.input as { QueueUrl: string }).QueueUrl;
        const out = result.output as { Messages?: { ReceiptHandle?: string; Body?: string }[] };
        for (const m of out.Messages ?? []) {
          if (m.ReceiptHandle)
            received.push({ url, handle: m.ReceiptHandle, id: decodeEnvelope(m.Body)?.id });
        }
      }
      return result;
    },
    { step: 'initialize', name: 'recordReceipts' },
  );
  /**
   * What SQS does when the visibility timeout of the receives made before `mark` runs out: the
   * messages they hid are visible again. Only those receives' own handles are used, so a message
   * received again since (by a lane of the restarted dispatcher) is left alone: the stand-in acts
   * on a handle only while the message is still in flight under it.
   */
  const letSqsTimePass = async (queue: QueueTarget, mark: number) => {
    for (const r of received.slice(0, mark).filter((x) => x.url === queue.sqsUrl)) {
      await d.host.sqs
        .send(
          new ChangeMessageVisibilityCommand({
            QueueUrl: r.url,
            ReceiptHandle: r.handle,
            VisibilityTimeout: 0,
          }),
        )
        .catch(() => undefined); // deleted since, or received again under a newer handle
    }
  };
  return { mark: () => received.length, letSqsTimePass };
}

/*
 * realTimeAgain: the harness's dispatcher runs its lanes on real time (it takes no clock), while
 * the Host runs on the injected one. Once the Host has done what the jump was for (recovery past
 * the slot deadline), its clock is set back to real time: leaving the Host a quarter of an hour
 * ahead of the runners would be a clock skew no deployment has (a runner's receive times would
 * look 15 minutes old to the Host). Slots taken during the jump merely keep later deadlines.
 */

/** Queue holding `bodies` (sent one by one, before any consumer), so the first batch has them all. */
async function queueWith(d: DeliveryHost, name: string, bodies: string[]) {
  const queue = await serial(() => d.createQueue('team', `${name}-q`));
  const ids: Record<string, string> = {};
  for (const b of bodies) ids[b] = await d.host.producer.send(queue, b);
  return { queue, ids };
}

for (const [label, timings] of [
  ['shortened', SHORTENED],
  ['default', DEFAULTS],
] as const) {
  describe(`QC-08 delete with a real handler in flight (${label} delivery settings)`, () => {
    let d: DeliveryHost;
    beforeAll(async () => {
      d = await createDeliveryHost(timings);
      d.startDispatcher();
    });
    afterAll(async () => d.close());

    it(`QC-08 (${label} settings) a delete waits for the running handler, acknowledges nothing unsettled, and completes when it ends; exactly the unsettled messages stay`, async ({
      expect,
    }) => {
      const name = `del-${label}`;
      const log = d.logFile(name);
      const flag = `${log}.go`;
      const { queue, ids } = await queueWith(d, name, ['acked', 'open-1', 'open-2']);
      const { consumerUid } = await serial(() =>
        consumerOn(
          d,
          name,
          queue,
          recordingWorker(
            log,
            `const m = ${byBody('acked')};
            if (m) { await batch.acknowledge(m.id); rec({ ev: 'acked', id: m.id }); }
            ${waitForFlag(flag, 50_000)}
            throw new Error('the rest is retried, never acknowledged');`,
          ),
          { maxBatchSize: 3, maxBatchTimeoutSeconds: 1, maxConcurrency: 1, maxRetries: 3 },
        ),
      );
      // The handler runs: it has the whole batch and its acknowledgement of one message resolved.
      await waitFor('the handler acknowledged one message', () => records(log).find((e) => e.ev === 'acked'));
      const started = records(log).filter((e) => e.ev === 'start');
      expect(started).toHaveLength(1);
      expect(started[0]?.size).toBe(3);

      const startedAt = started[0]?.t as number;
      const opId = await deleteResource(d, consumerUid);
      for (let round = 0; round < 3; round++) {
        await d.host.settle();
        const op = await operation(d, opId);
        // The premise: the handler is still inside its worker timeout (it waits for the flag).
        const elapsed = Date.now() - startedAt;
        expect(elapsed, `round ${round}: ${elapsed} ms since the handler started`).toBeLessThan(
          timings.workerTimeoutMs - 5_000,
        );
        expect(op, `round ${round}`).toMatchObject({ status: 'reconciling' });
        // The handler is still running; the delete acknowledged nothing: every unsettled message
        // (and, until the batch is finalised, possibly the acknowledged one) is still in SQS.
        expect(records(log).some((e) => e.ev === 'end')).toBe(false);
        const c = await queueCounts(d, queue);
        expect(c.visible + c.inFlight + c.delayed).toBeGreaterThanOrEqual(2);
        await sleep(1_100); // the delete is re-checked about once a second
      }

      raiseFlag(flag);
      await waitFor('the handler ended', () => records(log).find((e) => e.ev === 'end'));
      expect(await operationEnds(d, opId)).toMatchObject({ status: 'succeeded', effect: 'complete' });
      expect([404, 410]).toContain((await d.host.request({ path: `/resources/${consumerUid}` })).status);

      // The acknowledged message is gone; the two the handler left unsettled are still queued.
      expect(await messagesOnQueue(d, queue, 2)).toEqual([ids['open-1'], ids['open-2']].sort());
      // Each was delivered once: nothing was handed to the stopping consumer again.
      expect(attemptsById(records(log))).toEqual(
        new Map([
          [ids.acked, [1]],
          [ids['open-1'], [1]],
          [ids['open-2'], [1]],
        ]),
      );
    });
  });
}

describe('DL-07 at default delivery settings', () => {
  let d: DeliveryHost;
  beforeAll(async () => {
    d = await createDeliveryHost(DEFAULTS);
    d.startDispatcher();
  });
  afterAll(async () => d.close());

  it('DL-07 (default settings) maxRetries 3, a handler that always throws: exactly 4 deliveries with attempts 1..4, then one dead-letter message with a new id and attempts 1', async ({
    expect,
  }) => {
    const log = d.logFile('dl07');
    const deadLog = d.logFile('dl07-dead');
    const queue = await d.createQueue('team', 'dl07-q');
    const dlq = await d.createQueue('team', 'dl07-dlq');
    await consumerOn(d, 'dl07', queue, recordingWorker(log, `throw new Error('always fails');`), {
      maxRetries: 3,
      deadLetterQueue: dlq,
    });
    await consumerOn(d, 'dl07-dead', dlq, recordingWorker(deadLog));
    const id = await d.host.producer.send(queue, 'poison');

    await waitFor('the dead-lettered copy consumed', () => {
      const e = records(deadLog);
      return e.some((x) => x.ev === 'msg') && allEnded(e);
    });
    await waitDrained(d, queue);
    await waitDrained(d, dlq);
    await waitFor('the source handlers ended', () => allEnded(records(log)));
    // Nothing else arrives on either queue (one more idle poll of each lane).
    await sleep(1_500);

    const source = records(log).filter((e) => e.ev === 'msg');
    expect(source.map((e) => [e.id, e.attempts])).toEqual([
      [id, 1],
      [id, 2],
      [id, 3],
      [id, 4],
    ]);
    const moved = records(deadLog).filter((e) => e.ev === 'msg');
    expect(moved).toHaveLength(1);
    const copy = moved[0] as Rec;
    expect(copy.id).not.toBe(id);
    expect(copy.attempts).toBe(1);
    expect(text(copy.body)).toBe('poison');
  });
});

describe('RC-01 at default delivery settings, with an injected Host clock', () => {
  let offset = 0;
  const clock = () => Date.now() + offset;
  let d: DeliveryHost;
  let sqsTime: ReturnType<typeof recordReceipts>;
  beforeAll(async () => {
    d = await createDeliveryHost({ ...DEFAULTS, clock });
    sqsTime = recordReceipts(d);
    d.startDispatcher();
  });
  afterAll(async () => d.close());

  it('RC-01 (default settings) a crash with a batch in flight: once the Host clock passes the slot deadline the unsettled messages are retried (attempts 2), never acknowledged; the one settled before the crash keeps its settlement', async ({
    expect,
  }) => {
    const log = d.logFile('rc01');
    const { queue, ids } = await queueWith(d, 'rc01', ['settled', 'open-1', 'open-2']);
    const { consumerUid } = await serial(() =>
      consumerOn(
        d,
        'rc01',
        queue,
        recordingWorker(
          log,
          `if (batch.messages.every((m) => m.attempts === 1)) {
            const m = ${byBody('settled')};
            if (m) { await batch.acknowledge(m.id); rec({ ev: 'acked', id: m.id }); }
            await new Promise((r) => setTimeout(r, 600_000)); // until the crash cuts it off
          }`,
        ),
        { maxBatchSize: 3, maxBatchTimeoutSeconds: 1, maxConcurrency: 1, maxRetries: 3 },
      ),
    );
    await waitFor('the handler acknowledged one message', () => records(log).find((e) => e.ev === 'acked'));
    const first = records(log).find((e) => e.ev === 'start') as Rec;
    expect(first.size).toBe(3);
    const batchId = first.batch as string;
    const deadline = (await d.host.delivery.slotsOf(consumerUid))[batchId] as number;
    // The default worker timeout is in the slot's deadline (idle wait + batch timeout + 900 s +
    // margin), so without the injected clock this test would wait a quarter of an hour.
    expect(deadline - first.t).toBeGreaterThan(DEFAULT_WORKER_TIMEOUT_MS);

    const beforeCrash = sqsTime.mark();
    await d.crash();
    d.startDispatcher();
    // The Host's clock passes the slot deadline (SQS keeps the messages hidden, on real time).
    offset = deadline + 1_000 - Date.now();
    await waitFor(
      'the crashed batch recovered (its slot released)',
      async () => !(batchId in (await d.host.delivery.slotsOf(consumerUid))),
      20_000,
    );
    offset = 0; // see realTimeAgain
    // SQS's visibility timeout (deadline + grace) runs out: the messages return (a Host that
    // gives them back itself at recovery has redelivered them already; then this changes nothing).
    await sqsTime.letSqsTimePass(queue, beforeCrash);
    // Drained: the redelivered copies were acknowledged by their handler's return (or, were the
    // unsettled ones wrongly acknowledged by recovery, deleted on sight — the check below tells).
    await waitDrained(d, queue);
    await waitFor('every batch after the crash ended', () =>
      // The crashed batch never records its end; every later one must.
      allEnded(records(log).filter((e) => e.batch !== batchId)),
    );
    expect(attemptsById(records(log))).toEqual(
      new Map([
        [ids.settled, [1]],
        [ids['open-1'], [1, 2]],
        [ids['open-2'], [1, 2]],
      ]),
    );
    // The retry is one batch of exactly the two unsettled messages.
    const retried = records(log).filter((e) => e.ev === 'start' && e.batch !== batchId);
    expect(retried.map((e) => e.size)).toEqual([2]);
  });
});

describe('QC-08 at default delivery settings: a delete after a crash, with an injected Host clock', () => {
  let offset = 0;
  const clock = () => Date.now() + offset;
  let d: DeliveryHost;
  let sqsTime: ReturnType<typeof recordReceipts>;
  beforeAll(async () => {
    d = await createDeliveryHost({ ...DEFAULTS, clock });
    sqsTime = recordReceipts(d);
    d.startDispatcher();
  });
  afterAll(async () => d.close());

  it('QC-08 (default settings) deleting a consumer whose handler died in a crash completes once its batch is recovered; nothing unsettled is acknowledged, and the settled one stays settled for the next consumer', async ({
    expect,
  }) => {
    const log = d.logFile('qc08c');
    const { queue, ids } = await queueWith(d, 'qc08c', ['settled', 'open-1', 'open-2']);
    const { consumerUid } = await serial(() =>
      consumerOn(
        d,
        'qc08c',
        queue,
        recordingWorker(
          log,
          `const m = ${byBody('settled')};
          if (m) { await batch.acknowledge(m.id); rec({ ev: 'acked', id: m.id }); }
          await new Promise((r) => setTimeout(r, 600_000)); // until the crash cuts it off`,
        ),
        { maxBatchSize: 3, maxBatchTimeoutSeconds: 1, maxConcurrency: 1, maxRetries: 3 },
      ),
    );
    await waitFor('the handler acknowledged one message', () => records(log).find((e) => e.ev === 'acked'));
    const first = records(log).find((e) => e.ev === 'start') as Rec;
    expect(first.size).toBe(3);
    const batchId = first.batch as string;
    const deadline = (await d.host.delivery.slotsOf(consumerUid))[batchId] as number;
    expect(deadline - first.t).toBeGreaterThan(DEFAULT_WORKER_TIMEOUT_MS);

    const beforeCrash = sqsTime.mark();
    await d.crash();
    d.startDispatcher();
    const opId = await deleteResource(d, consumerUid);
    await d.host.settle();
    // The Host's clock passes the dead batch's slot deadline: the delete can complete.
    offset = deadline + 1_000 - Date.now();
    expect(await operationEnds(d, opId)).toMatchObject({ status: 'succeeded', effect: 'complete' });
    offset = 0; // see realTimeAgain
    // Nothing unsettled was acknowledged by the detach or the recovery: once SQS's visibility
    // timeout has run out, both unsettled messages are on the queue, and at most the settled
    // one besides (its original may stay in SQS; its settlement is recorded).
    await sqsTime.letSqsTimePass(queue, beforeCrash);
    const c = await queueCounts(d, queue);
    expect(c.visible + c.inFlight + c.delayed).toBeGreaterThanOrEqual(2);
    expect(c.visible + c.inFlight + c.delayed).toBeLessThanOrEqual(3);

    // A new consumer on the queue gets exactly the two unsettled messages, as retries, and never
    // the acknowledged one.
    const nextLog = d.logFile('qc08c-next');
    await serial(() =>
      consumerOn(d, 'qc08c-next', queue, recordingWorker(nextLog), {
        maxBatchSize: 3,
        maxBatchTimeoutSeconds: 1,
        maxConcurrency: 1,
      }),
    );
    await waitDrained(d, queue);
    await waitFor('the new consumer handled them', () => allEnded(records(nextLog)));
    expect(attemptsById(records(nextLog))).toEqual(
      new Map([
        [ids['open-1'], [2]],
        [ids['open-2'], [2]],
      ]),
    );
  });
});
