/**
 * RC-02: an Operation survives a Host crash (SIGKILL via TAKOFORM_CRASH_AT) right after
 * acceptance, after the possible-dispatch mark, and after the backend call, and finishes from
 * durable state once the Host restarts on the same data folder.
 *
 * The ModuleWorker backend has no external effect of its own (it observes the registered Worker),
 * so "no second backend effect" is checked here only through the Host's records: one Operation
 * id, generation 1, exactly one Resource. The "exactly one backend effect" check gets stronger
 * once the AtLeastOnceQueue backend lands: then the crash cases also count the SQS queues made.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  type ApiReply,
  type HostProcess,
  hostClient,
  MODULE_WORKER_FORM,
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
