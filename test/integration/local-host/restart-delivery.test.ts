/**
 * RC-01 / issue 11 item 1: a restart of the local Host must not stall its consumers. With the
 * DEFAULT delivery settings (no TAKOFORM_* timing variable, `--worker-timeout` 900 s), against a
 * real `npm start` child and its real stand-ins:
 *
 * - after a graceful stop (SIGINT) and a start on the same data folder, a new message to an
 *   existing consumer is delivered within a few seconds of the ready line;
 * - after `kill -9` while handlers run (and after SIGINT while they run), every message that was
 *   in flight is handed to a handler again (attempt 2) and completes within 30 s of the next
 *   ready line.
 *
 * The worker is a user module in the workers folder that appends one JSON line per event (the
 * Host never sees inside it); its records carry the Host's pid, so each delivery is attributed
 * to the incarnation that made it. Every wait is bounded, and each failure says what was measured.
 */
import { appendFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { readEvents } from '../../support/delivery-harness.ts';
import {
  type HostProcess,
  hostClient,
  MODULE_WORKER_FORM,
  type StartOptions,
  useHostProcesses,
  writeWorker,
} from '../../support/local-host-process.ts';

const QUEUE_FORM = 'https://edge.forms.takoform.com/forms/AtLeastOnceQueue/0.2.0/';
const CONSUMER_FORM = 'https://edge.forms.takoform.com/forms/QueueConsumer/0.3.0/';
const SPACE = 'default';

/** One line the worker wrote: a delivery (`msg`), the start of a hang, or a completed message. */
interface Rec {
  ev: 'msg' | 'hang' | 'done';
  id: string;
  attempts: number;
  body: string;
  /** The Host process whose worker thread ran the handler. */
  pid: number;
  t: number;
}

/**
 * The consumer's worker: records every delivery, then hangs for good on the first attempt of a
 * message whose body starts with "hang" (a never-resolving promise), throws on the first attempt
 * of one that starts with "throw", and otherwise returns.
 */
function workerSource(log: string): string {
  return `
import { appendFileSync } from 'node:fs';
const LOG = ${JSON.stringify(log)};
const rec = (o) => appendFileSync(LOG, JSON.stringify({ ...o, pid: process.pid, t: Date.now() }) + '\\n');
export default {
  async queue(batch) {
    for (const m of batch.messages) {
      rec({ ev: 'msg', id: m.id, attempts: m.attempts, body: Buffer.from(m.body).toString('utf8') });
    }
    for (const m of batch.messages) {
      const body = Buffer.from(m.body).toString('utf8');
      if (body.startsWith('hang') && m.attempts === 1) {
        rec({ ev: 'hang', id: m.id, attempts: m.attempts, body });
        await new Promise(() => {});
      }
      if (body.startsWith('throw') && m.attempts === 1) throw new Error('fails on its first attempt');
    }
    for (const m of batch.messages) {
      rec({ ev: 'done', id: m.id, attempts: m.attempts, body: Buffer.from(m.body).toString('utf8') });
    }
  },
};`;
}

const records = (log: string) => readEvents(log) as unknown as Rec[];

/** Polls `check` every 100 ms until it returns a value or `deadline` (epoch ms) passes. */
async function until<T>(deadline: number, check: () => T | undefined): Promise<T | undefined> {
  for (;;) {
    const v = check();
    if (v !== undefined) return v;
    if (Date.now() > deadline) return undefined;
    await sleep(100);
  }
}

const seconds = (ms: number) => (ms / 1000).toFixed(1);

/** The Host's last log lines, for a failure message: what it did instead is then in the report. */
const logTail = (host: HostProcess, lines = 40) =>
  `\n--- last log lines of Host ${host.pid} ---\n${`${host.stdout()}\n${host.stderr()}`
    .split('\n')
    .filter((l) => l.trim() !== '')
    .slice(-lines)
    .join('\n')}`;

/** Creates a Resource through the Host API and waits until its Operation succeeded. */
async function create(host: HostProcess, form: string, name: string, spec: unknown): Promise<string> {
  const api = hostClient(host);
  const r = await api.request('POST', '/resources', {
    body: { form, space: SPACE, name, spec },
    headers: { 'idempotency-key': `rc01-${name}-${host.pid}` },
  });
  if (r.status !== 202) throw new Error(`create ${name} answered ${r.status}: ${JSON.stringify(r.body)}`);
  const done = await api.waitTerminal(r.body.id, 30_000);
  if (done.body.status !== 'succeeded') throw new Error(`create ${name}: ${JSON.stringify(done.body)}`);
  return r.body.resourceUid as string;
}

/** Sends messages through the HTTP producer extension; returns their ids in order. */
async function produce(host: HostProcess, queueUid: string, bodies: string[]): Promise<string[]> {
  const res = await fetch(`${host.loopback}/ext/queues/v1/queues/${queueUid}/messages`, {
    method: 'POST',
    headers: { authorization: `Bearer ${host.ready.apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ messages: bodies.map((b) => ({ body: Buffer.from(b).toString('base64') })) }),
    signal: AbortSignal.timeout(15_000),
  });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`send answered ${res.status}: ${text}`);
  const ids = (JSON.parse(text) as { messageIds: string[] }).messageIds;
  expect(ids).toHaveLength(bodies.length);
  return ids;
}

/** A queue, a ModuleWorker and a QueueConsumer with the given concurrency and batch size. */
async function consumerSetUp(
  host: HostProcess,
  log: string,
  consumer: { maxBatchSize: number; maxConcurrency: number },
): Promise<{ queueUid: string }> {
  writeWorker(host.workersDir, SPACE, 'rd-worker', workerSource(log));
  const [queueUid, workerUid] = await Promise.all([
    create(host, QUEUE_FORM, 'rd-queue', { messageRetentionSeconds: 86_400 }),
    create(host, MODULE_WORKER_FORM, 'rd-worker', {}),
  ]);
  await create(host, CONSUMER_FORM, 'rd-consumer', {
    queue: { resourceUid: queueUid },
    worker: { resourceUid: workerUid },
    maxBatchSize: consumer.maxBatchSize,
    maxBatchTimeoutSeconds: 0,
    maxConcurrency: consumer.maxConcurrency,
    maxRetries: 3,
    retryDelaySeconds: 0,
  });
  return { queueUid };
}

type Hosts = ReturnType<typeof useHostProcesses>;

/** Starts a Host; `readyAt` is the wall-clock time of its ready line (`readyMs` after the spawn). */
async function startAt(hosts: Hosts, o: StartOptions) {
  const spawnedAt = Date.now();
  const host = await hosts.start({ ...o, readyTimeoutMs: 30_000 });
  return { host, readyAt: spawnedAt + host.readyMs };
}

const HANG_COUNT = 5;

/**
 * Cases (b) and (c): five messages whose first attempts hang, one per batch, all running at once
 * (maxConcurrency 5); the Host is stopped with `stop`, started again at once on the same data
 * folder, and every message must be delivered again (attempt 2) and complete within 30 s of the
 * ready line.
 */
async function inFlightAcrossRestart(
  hosts: Hosts,
  stop: (host: HostProcess) => Promise<unknown>,
  label: string,
) {
  const scratch = hosts.tempDir('takoform-rc01-');
  const log = path.join(scratch, 'worker.jsonl');
  appendFileSync(log, '');
  const { host: first } = await startAt(hosts, {});
  const { queueUid } = await consumerSetUp(first, log, { maxBatchSize: 1, maxConcurrency: HANG_COUNT });
  const bodies = Array.from({ length: HANG_COUNT }, (_, i) => `hang-${i + 1}`);
  const sentAt = Date.now();
  const ids = await produce(first, queueUid, bodies);

  const hanging = await until(Date.now() + 30_000, () => {
    const h = records(log).filter((r) => r.ev === 'hang' && r.pid === first.pid);
    return new Set(h.map((r) => r.body)).size === HANG_COUNT ? h : undefined;
  });
  const startedBodies = [
    ...new Set(
      records(log)
        .filter((r) => r.ev === 'hang')
        .map((r) => r.body),
    ),
  ];
  expect(
    startedBodies.sort(),
    `all ${HANG_COUNT} handlers hang on their first attempt before the stop (started ${startedBodies.length} within 30 s of the send)`,
  ).toEqual([...bodies].sort());
  console.info(
    `${label}: ${hanging?.length} handlers running ${seconds(Date.now() - sentAt)} s after the send`,
  );

  const stopAt = Date.now();
  const exit = await stop(first);
  console.info(
    `${label}: first Host exited ${seconds(Date.now() - stopAt)} s after the signal: ${JSON.stringify(exit)}`,
  );

  const { host: second, readyAt: ready } = await startAt(hosts, {
    dataDir: first.dataDir,
    workersDir: first.workersDir,
  });
  console.info(`${label}: restarted Host ready ${seconds(ready - stopAt)} s after the signal`);
  const bound = ready + 30_000;
  await until(bound + 2_000, () => {
    const done = records(log).filter((r) => r.ev === 'done' && r.pid === second.pid);
    return new Set(done.map((r) => r.body)).size === HANG_COUNT ? done : undefined;
  });
  const after = records(log).filter((r) => r.pid === second.pid);
  const redelivered = after.filter((r) => r.ev === 'msg');
  const done = after.filter((r) => r.ev === 'done');
  const lastDone = Math.max(0, ...done.map((r) => r.t));
  const firstRedelivery = redelivered.length ? Math.min(...redelivered.map((r) => r.t)) : undefined;
  console.info(
    `${label}: after the restart ${new Set(redelivered.map((r) => r.body)).size}/${HANG_COUNT} redelivered, ` +
      `${new Set(done.map((r) => r.body)).size}/${HANG_COUNT} completed; ` +
      (firstRedelivery === undefined
        ? `no delivery within ${seconds(Date.now() - ready)} s of the ready line`
        : `first redelivery ${seconds(firstRedelivery - ready)} s, last completion ${done.length ? seconds(lastDone - ready) : '-'} s after the ready line`),
  );
  expect(
    [...new Set(done.map((r) => r.body))].sort(),
    `every in-flight message completes within 30 s of the restarted Host's ready line (${done.length} of ${HANG_COUNT} did by ${seconds(Date.now() - ready)} s after it)${logTail(first)}${logTail(second)}`,
  ).toEqual([...bodies].sort());
  expect(lastDone - ready, 'last completion, ms after the ready line').toBeLessThanOrEqual(30_000);
  // Handed to a handler again with the interrupted attempt counted, and never acknowledged unseen.
  for (const [i, body] of bodies.entries()) {
    const again = redelivered.filter((r) => r.body === body);
    expect(
      again.map((r) => r.attempts),
      `attempts of ${body} after the restart`,
    ).toEqual([2]);
    expect(again[0]?.id, `${body} keeps its message id`).toBe(ids[i]);
  }
  expect(await second.stop('SIGTERM'), 'the restarted Host stops cleanly').toEqual({ code: 0, signal: null });
}

describe('RC-01 restarts do not stall consumers (issue 11 item 1), default delivery settings', () => {
  const hosts = useHostProcesses({ cleanup: 'afterEach' });

  it('RC-01 SIGINT and start again: a new message to an existing consumer is delivered within 10 s of the ready line', async () => {
    const scratch = hosts.tempDir('takoform-rc01-');
    const log = path.join(scratch, 'worker.jsonl');
    appendFileSync(log, '');
    const { host: first } = await startAt(hosts, {});
    const { queueUid } = await consumerSetUp(first, log, { maxBatchSize: 10, maxConcurrency: 2 });
    const sentAt = Date.now();
    await produce(first, queueUid, ['before-restart']);
    const before = await until(Date.now() + 30_000, () =>
      records(log).find((r) => r.ev === 'done' && r.body === 'before-restart'),
    );
    expect(before, 'the message before the restart is delivered and completes within 30 s').toBeDefined();
    console.info(
      `RC-01 SIGINT: before the restart, delivered ${seconds((before?.t ?? 0) - sentAt)} s after the send`,
    );

    const stopAt = Date.now();
    expect(await first.stop('SIGINT', 20_000), 'SIGINT stops the Host cleanly').toEqual({
      code: 0,
      signal: null,
    });
    console.info(`RC-01 SIGINT: the Host exited ${seconds(Date.now() - stopAt)} s after SIGINT`);

    const { host: second, readyAt: ready } = await startAt(hosts, {
      dataDir: first.dataDir,
      workersDir: first.workersDir,
    });
    const resentAt = Date.now();
    const [id] = await produce(second, queueUid, ['after-restart']);
    const after = await until(ready + 12_000, () =>
      records(log).find((r) => r.ev === 'done' && r.body === 'after-restart'),
    );
    const waited = (after?.t ?? Date.now()) - ready;
    console.info(
      after
        ? `RC-01 SIGINT: after the restart, delivered ${seconds(after.t - ready)} s after the ready line (${seconds(after.t - resentAt)} s after the send)`
        : `RC-01 SIGINT: after the restart, not delivered ${seconds(waited)} s after the ready line`,
    );
    expect(
      after,
      `the new message is delivered after the restart (waited ${seconds(waited)} s after the ready line)`,
    ).toBeDefined();
    expect(waited, 'delivery of the new message, ms after the ready line').toBeLessThanOrEqual(10_000);
    expect(after).toMatchObject({ id, attempts: 1, pid: second.pid });
    expect(await second.stop('SIGTERM'), 'the restarted Host stops cleanly').toEqual({
      code: 0,
      signal: null,
    });
  }, 90_000);

  it('RC-01 kill -9 with handlers running, restart at once: every in-flight message completes within 30 s of the ready line', async () => {
    await inFlightAcrossRestart(hosts, (h) => h.kill9(), 'RC-01 kill -9');
  }, 90_000);

  it('RC-01 SIGINT with handlers running, start again: every in-flight message completes within 30 s of the ready line', async () => {
    await inFlightAcrossRestart(
      hosts,
      async (h) => {
        const exit = await h.stop('SIGINT', 20_000);
        // main.ts bounds the stop at 15 s (exit code 1 past it): a hung handler must not hold it.
        expect(exit, 'SIGINT stops the Host cleanly within its bound').toEqual({ code: 0, signal: null });
        return exit;
      },
      'RC-01 SIGINT in flight',
    );
  }, 90_000);

  it('RC-01 killed after a finalisation claimed its visibility changes, before SQS took them: the retried message is delivered again within 30 s of the ready line', async () => {
    const scratch = hosts.tempDir('takoform-rc01-');
    const log = path.join(scratch, 'worker.jsonl');
    appendFileSync(log, '');
    const { host: first } = await startAt(hosts, {
      env: { TAKOFORM_CRASH_AT: 'delivery.after-release-claim' },
    });
    const { queueUid } = await consumerSetUp(first, log, { maxBatchSize: 1, maxConcurrency: 1 });
    const [id] = await produce(first, queueUid, ['throw-1']);
    // The handler throws, so the finalisation retries the message: it claims the batch's one
    // release, and the Host dies before asking SQS to make the message visible again.
    expect(await first.waitExit(30_000), `the Host died at the crash point${logTail(first)}`).toEqual({
      code: null,
      signal: 'SIGKILL',
    });
    const { host: second, readyAt: ready } = await startAt(hosts, {
      dataDir: first.dataDir,
      workersDir: first.workersDir,
    });
    const again = await until(ready + 32_000, () =>
      records(log).find((r) => r.ev === 'done' && r.pid === second.pid),
    );
    console.info(
      again
        ? `RC-01 release claimed: delivered again ${seconds(again.t - ready)} s after the ready line`
        : `RC-01 release claimed: not delivered again ${seconds(Date.now() - ready)} s after the ready line`,
    );
    expect(again, `the retried message is delivered again after the restart${logTail(second)}`).toMatchObject(
      {
        id,
        attempts: 2,
      },
    );
    expect((again?.t ?? Infinity) - ready, 'ms after the ready line').toBeLessThanOrEqual(30_000);
    expect(
      records(log)
        .filter((r) => r.ev === 'msg')
        .map((r) => r.attempts),
      'one delivery before the crash, one after it',
    ).toEqual([1, 2]);
    expect(await second.stop('SIGTERM'), 'the restarted Host stops cleanly').toEqual({
      code: 0,
      signal: null,
    });
  }, 90_000);
});
