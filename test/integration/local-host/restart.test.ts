/**
 * RC-02: an Operation survives a Host crash (SIGKILL via TAKOFORM_CRASH_AT) right after
 * acceptance, after the possible-dispatch mark, and after the backend call, and finishes from
 * durable state once the Host restarts on the same data folder.
 *
 * The ModuleWorker backend has no external effect of its own (it observes the registered Worker),
 * so its cases check "no second backend effect" only through the Host's records: one Operation
 * id, generation 1, exactly one Resource. The AtLeastOnceQueue cases (issue 11 item 12) crash at
 * the same points while creating, updating and deleting a queue, whose backend effect is outside
 * the Host: after the restart the SQS stand-in (found through the `standins.json` the Host writes
 * into its data folder) holds exactly one queue for the Resource, with the updated attributes, or
 * none after the delete.
 */
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import {
  GetQueueAttributesCommand,
  GetQueueUrlCommand,
  ListQueuesCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import { describe, expect, it } from 'vitest';
import { sqsClient } from '../../../lambdas/adapters/aws/clients.ts';
import {
  type ApiReply,
  type HostProcess,
  hostClient,
  MODULE_WORKER_FORM,
  tcpListeners,
  useHostProcesses,
  writeWorker,
} from '../../support/local-host-process.ts';

/** Short executor leases, so a claim left by the crashed Host runs out in 2 s, not 60 s. */
const LEASE_ENV = { TAKOFORM_OPERATION_LEASE_MS: '2000' };

const CRASH_POINTS = [
  'operation.after-accept',
  'operation.after-dispatch-mark',
  'operation.after-backend',
] as const;

describe('RC-02 restart at each crash point', () => {
  const hosts = useHostProcesses({ cleanup: 'afterEach' });

  it.each(CRASH_POINTS)('%s: the Operation finishes after a restart, once', async (point) => {
    const workersDir = hosts.tempDir();
    const name = `crash-${point.split('.')[1]}-${Date.now().toString(36)}`;
    writeWorker(workersDir, 'default', name);
    const key = `rc02-${randomUUID()}`;
    const body = { form: MODULE_WORKER_FORM, space: 'default', name, spec: {} };

    const crashing = await hosts.start({ workersDir, env: { ...LEASE_ENV, TAKOFORM_CRASH_AT: point } });
    const create = (host: HostProcess) =>
      hostClient(host).request('POST', '/resources', { body, headers: { 'idempotency-key': key } });

    // The response may be lost with the process: a socket error is an allowed outcome here.
    let first: ApiReply | undefined;
    try {
      first = await create(crashing);
    } catch {
      first = undefined;
    }
    console.info(`${point}: first response ${first ? 'received' : 'lost with the process'}`);
    if (point === 'operation.after-accept') expect(first).toBeUndefined();
    if (first) expect(first.status).toBe(202);
    // The crash point must really have been reached: the Host killed itself with SIGKILL.
    expect(await crashing.waitExit(20_000)).toEqual({ code: null, signal: 'SIGKILL' });

    const restarted = await hosts.start({ dataDir: crashing.dataDir, workersDir, env: LEASE_ENV });
    const api = hostClient(restarted);
    const replay = await create(restarted);
    expect([200, 202]).toContain(replay.status);
    expect(replay.body).toMatchObject({ action: 'create', generation: 1 });
    const opId: string = replay.body.id;
    if (first) expect(opId).toBe(first.body.id);

    const done = await api.waitTerminal(opId, 20_000);
    expect(done.status).toBe(200);
    expect(done.body).toMatchObject({ id: opId, status: 'succeeded', effect: 'complete', generation: 1 });
    expect(done.body.error).toBeUndefined();

    const again = await create(restarted);
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ id: opId, status: 'succeeded', generation: 1 });

    const items = await api.listByName('default', name);
    expect(items).toHaveLength(1);
    expect(items[0].uid).toBe(replay.body.resourceUid);
    const resource = await api.request('GET', `/resources/${replay.body.resourceUid}`);
    expect(resource.status).toBe(200);
    expect(resource.body).toMatchObject({
      generation: 1,
      observedGeneration: 1,
      phase: 'idle',
      lastOperation: opId,
      observed: { ready: true },
    });

    expect(await restarted.stop('SIGTERM')).toEqual({ code: 0, signal: null });
  });
});

describe('RC-02 restart with the default lease', () => {
  const hosts = useHostProcesses({ cleanup: 'afterEach' });

  it('RC-02: a step the killed run had claimed resumes when the Host restarts, not when its 60 s lease runs out', async () => {
    const workersDir = hosts.tempDir();
    const name = `lease-${Date.now().toString(36)}`;
    writeWorker(workersDir, 'default', name);
    const body = { form: MODULE_WORKER_FORM, space: 'default', name, spec: {} };
    const headers = { 'idempotency-key': `rc02-lease-${randomUUID()}` };
    // The default lease (no TAKOFORM_OPERATION_LEASE_MS): the crash comes right after the claim.
    const crashing = await hosts.start({
      workersDir,
      env: { TAKOFORM_CRASH_AT: 'operation.after-dispatch-mark' },
    });
    const first = await hostClient(crashing)
      .request('POST', '/resources', { body, headers })
      .catch(() => undefined);
    expect(await crashing.waitExit(20_000)).toEqual({ code: null, signal: 'SIGKILL' });
    const claimedAt = Date.now();

    const restarted = await hosts.start({ dataDir: crashing.dataDir, workersDir });
    const api = hostClient(restarted);
    const replay = await api.request('POST', '/resources', { body, headers });
    if (first) expect(replay.body.id).toBe(first.body.id);
    // Far inside the 60 s the claim would otherwise hold the Operation for.
    const done = await api.waitTerminal(replay.body.id, 20_000);
    expect(done.body).toMatchObject({ status: 'succeeded', effect: 'complete', generation: 1 });
    console.info(`default lease: succeeded ${Date.now() - claimedAt} ms after the kill`);
    expect(Date.now() - claimedAt).toBeLessThan(60_000);
    expect(await restarted.stop('SIGTERM')).toEqual({ code: 0, signal: null });
  });
});

const QUEUE_FORM = 'https://edge.forms.takoform.com/forms/AtLeastOnceQueue/0.2.0/';
/** The local Host names each Resource's SQS queue `takoform-<uid>`. */
const SQS_PREFIX = 'takoform-';

/**
 * A client for the SQS stand-in of a running Host: `standins.json` in its data folder names the
 * stand-in's PID (its marker is the data folder's `sqs` directory) and /proc gives its port.
 */
function sqsOf(host: HostProcess): SQSClient {
  const recorded: { pid: number; marker: string }[] = JSON.parse(
    readFileSync(path.join(host.dataDir, 'standins.json'), 'utf8'),
  );
  const entry = recorded.find((r) => r.marker === path.join(host.dataDir, 'sqs'));
  if (!entry) throw new Error(`no SQS stand-in in standins.json: ${JSON.stringify(recorded)}`);
  const listeners = tcpListeners([entry.pid]);
  if (listeners.length !== 1 || !listeners[0]) {
    throw new Error(`expected one listener of the SQS stand-in, found ${JSON.stringify(listeners)}`);
  }
  return sqsClient(`http://127.0.0.1:${listeners[0].port}`);
}

/** Every queue the SQS stand-in holds under the Host's prefix, by name. */
async function queueNames(sqs: SQSClient): Promise<string[]> {
  const out = await sqs.send(new ListQueuesCommand({ QueueNamePrefix: SQS_PREFIX, MaxResults: 1000 }));
  return (out.QueueUrls ?? []).map((u) => decodeURIComponent(u.split('/').at(-1) ?? '')).sort();
}

async function retentionOf(sqs: SQSClient, name: string): Promise<string | undefined> {
  const { QueueUrl } = await sqs.send(new GetQueueUrlCommand({ QueueName: name }));
  const out = await sqs.send(
    new GetQueueAttributesCommand({ QueueUrl, AttributeNames: ['MessageRetentionPeriod'] }),
  );
  return out.Attributes?.MessageRetentionPeriod;
}

type QueueAction = 'create' | 'update' | 'delete';
const QUEUE_CASES = (['create', 'update', 'delete'] as const).flatMap((action) =>
  CRASH_POINTS.map((point) => [action, point] as [QueueAction, (typeof CRASH_POINTS)[number]]),
);

describe('RC-02 restart at each crash point of an AtLeastOnceQueue Operation (issue 11 item 12)', () => {
  const hosts = useHostProcesses({ cleanup: 'afterEach' });

  it.each(QUEUE_CASES)(
    'RC-02 %s of an AtLeastOnceQueue, crash at %s: after the restart exactly the intended SQS queues exist',
    async (action, point) => {
      const name = `q-${action}-${point.split('.')[1]}-${Date.now().toString(36)}`;
      const createBody = {
        form: QUEUE_FORM,
        space: 'default',
        name,
        spec: { messageRetentionSeconds: 3600 },
      };
      // The create is the first Operation to reach each point; the update or delete the second.
      const crashAt = action === 'create' ? point : `${point}@2`;
      const t0 = Date.now();
      const phases: string[] = [];
      const phase = (what: string) => phases.push(`${what} ${((Date.now() - t0) / 1000).toFixed(1)}s`);
      const crashing = await hosts.start({ env: { ...LEASE_ENV, TAKOFORM_CRASH_AT: crashAt } });
      phase('first ready');
      const key = `rc02-${action}-${randomUUID()}`;

      let uid: string | undefined;
      let send: (host: HostProcess) => Promise<ApiReply>;
      if (action === 'create') {
        send = (host) =>
          hostClient(host).request('POST', '/resources', {
            body: createBody,
            headers: { 'idempotency-key': key },
          });
      } else {
        const api = hostClient(crashing);
        const created = await api.request('POST', '/resources', {
          body: createBody,
          headers: { 'idempotency-key': `rc02-setup-${randomUUID()}` },
        });
        expect(created.status).toBe(202);
        uid = created.body.resourceUid as string;
        expect((await api.waitTerminal(created.body.id)).body).toMatchObject({ status: 'succeeded' });
        phase('set-up create done');
        expect(crashing.child.exitCode, 'the set-up create must not reach the crash point').toBeNull();
        expect(crashing.child.signalCode).toBeNull();
        expect(await queueNames(sqsOf(crashing))).toEqual([`${SQS_PREFIX}${uid}`]);
        const target = uid;
        send =
          action === 'update'
            ? (host) =>
                hostClient(host).request('PUT', `/resources/${target}`, {
                  body: { spec: { messageRetentionSeconds: 7200 } },
                  headers: { 'idempotency-key': key, 'takoform-expected-generation': '1' },
                })
            : (host) =>
                hostClient(host).request('DELETE', `/resources/${target}`, {
                  headers: { 'idempotency-key': key, 'takoform-expected-generation': '1' },
                });
      }

      // The response may be lost with the process: a socket error is an allowed outcome here.
      let first: ApiReply | undefined;
      try {
        first = await send(crashing);
      } catch {
        first = undefined;
      }
      console.info(`${action} ${point}: first response ${first ? 'received' : 'lost with the process'}`);
      if (point === 'operation.after-accept') expect(first).toBeUndefined();
      if (first) expect(first.status).toBe(202);
      // The crash point must really have been reached: the Host killed itself with SIGKILL.
      expect(await crashing.waitExit(20_000)).toEqual({ code: null, signal: 'SIGKILL' });
      phase('crashed');

      const restarted = await hosts.start({ dataDir: crashing.dataDir, env: LEASE_ENV });
      phase('restart ready');
      const api = hostClient(restarted);
      const replay = await send(restarted);
      expect([200, 202]).toContain(replay.status);
      const generation = action === 'create' ? 1 : 2;
      expect(replay.body).toMatchObject({ action, generation });
      const opId: string = replay.body.id;
      if (first) expect(opId).toBe(first.body.id);
      uid ??= replay.body.resourceUid as string;
      expect(replay.body.resourceUid).toBe(uid);

      const done = await api.waitTerminal(opId, 30_000);
      phase('terminal');
      expect(done.status).toBe(200);
      expect(done.body).toMatchObject({ id: opId, status: 'succeeded', effect: 'complete', generation });
      expect(done.body.error).toBeUndefined();
      const again = await send(restarted);
      expect(again.status).toBe(200);
      expect(again.body).toMatchObject({ id: opId, status: 'succeeded', generation });

      const sqs = sqsOf(restarted);
      const queues = await queueNames(sqs);
      console.info(`${action} ${point}: SQS queues after the restart ${JSON.stringify(queues)}`);
      const items = await api.listByName('default', name);
      if (action === 'delete') {
        expect(queues, 'no SQS queue is left after the delete').toEqual([]);
        expect(items).toEqual([]);
        expect([404, 410]).toContain((await api.request('GET', `/resources/${uid}`)).status);
      } else {
        expect(queues, "exactly one SQS queue, the Resource's").toEqual([`${SQS_PREFIX}${uid}`]);
        expect(await retentionOf(sqs, `${SQS_PREFIX}${uid}`)).toBe(action === 'update' ? '7200' : '3600');
        expect(items.map((r: { uid: string }) => r.uid)).toEqual([uid]);
        const resource = await api.request('GET', `/resources/${uid}`);
        expect(resource.status).toBe(200);
        expect(resource.body).toMatchObject({
          generation,
          observedGeneration: generation,
          phase: 'idle',
          lastOperation: opId,
          observed: { queueExists: true },
        });
      }

      expect(await restarted.stop('SIGTERM')).toEqual({ code: 0, signal: null });
      phase('stopped');
      console.info(`${action} ${point}: ${phases.join(', ')}`);
    },
  );
});
