import { beforeAll, describe, expect, it } from 'vitest';
import { OperationExecutor } from '../../../lambdas/engine/executor.ts';
import { newToken } from '../../../lambdas/engine/ids.ts';
import { createTestHost, FORMS, type TestHost } from '../../support/host-harness.ts';
import { countLookups, customStack, deferred, ScriptedForm, until } from './helpers.ts';

const mw = (name: string) => ({ form: FORMS.moduleWorker, space: 'team', name, spec: {} });
const LEASE_MS = 60_000;

describe('background execution (HA-15) with ModuleWorker', () => {
  let host: TestHost;
  let lookups: ReturnType<typeof countLookups>;
  beforeAll(async () => {
    host = await createTestHost();
    lookups = countLookups(host);
  });

  it('HA-15 GETs never start or resume work: repeated reads leave a queued Operation untouched', async () => {
    host.workers.set('team', 'lazy');
    const before = lookups.calls;
    const created = await host.create(mw('lazy'));
    const uid = created.body.resourceUid;
    const opId = created.body.id;
    const stored = await host.store.getOperation(opId);
    for (let i = 0; i < 10; i++) {
      const r = await host.request({ path: `/resources/${uid}` });
      expect(r.body.phase).toBe('pending');
      const o = await host.request({ path: `/operations/${opId}` });
      expect(o.status).toBe(200);
      expect(o.body).toMatchObject({ status: 'queued', effect: 'none' });
      await host.request({ path: '/resources', query: 'name=lazy' });
    }
    // Not claimed, not leased, not attempted, nothing dispatched, no backend call.
    expect(await host.store.getOperation(opId)).toEqual(stored);
    expect(lookups.calls).toBe(before);
    await host.settle();
    expect(lookups.calls).toBe(before + 1);
    expect((await host.request({ path: `/operations/${opId}` })).body.status).toBe('succeeded');
  });

  it('HA-15 two executors racing on one due Operation call the backend exactly once', async () => {
    host.workers.set('team', 'race');
    const created = await host.create(mw('race'));
    const gate = deferred();
    lookups.gate = gate.promise;
    const before = lookups.calls;
    const second = new OperationExecutor({ store: host.store, forms: host.forms });
    const runs = [host.executor.runDue(), host.executor.runDue(), second.runDue(), second.runDue()];
    // Let every executor try to claim while the winner is still inside the backend.
    await until(
      async () => lookups.calls,
      (n) => n > before,
    );
    await new Promise((r) => setTimeout(r, 100));
    expect(await new OperationExecutor({ store: host.store, forms: host.forms }).runDue()).toBe(0);
    gate.resolve();
    lookups.gate = undefined;
    const worked = await Promise.all(runs);
    expect(worked.reduce((a, b) => a + b, 0)).toBe(1);
    expect(lookups.calls).toBe(before + 1);
    const op = await host.request({ path: `/operations/${created.body.id}` });
    expect(op.body).toMatchObject({ status: 'succeeded', effect: 'complete' });
  });

  it('HA-15 possible dispatch is recorded before the backend call: reconciling/unknown while it runs', async () => {
    host.workers.set('team', 'marked');
    const key = host.newKey();
    const created = await host.create(mw('marked'), undefined, key);
    const gate = deferred();
    const entered = deferred();
    lookups.gate = gate.promise;
    lookups.entered = entered.resolve;
    const run = host.executor.runDue();
    await entered.promise;
    // The backend is blocked in the middle of the call.
    const during = await host.request({ path: `/operations/${created.body.id}` });
    expect(during.body).toMatchObject({ status: 'reconciling', effect: 'unknown' });
    expect((await host.store.getOperation(created.body.id))?.dispatchPossible).toBe(true);
    const replay = await host.create(mw('marked'), undefined, key);
    expect(replay.status).toBe(202);
    expect(replay.headers['retry-after']).toMatch(/^[1-9]\d*$/);
    expect(replay.body).toMatchObject({ id: created.body.id, status: 'reconciling' });
    expect((await host.request({ path: `/resources/${created.body.resourceUid}` })).body.phase).toBe(
      'pending',
    );
    gate.resolve();
    lookups.gate = undefined;
    lookups.entered = undefined;
    expect(await run).toBe(1);
    const after = await host.request({ path: `/operations/${created.body.id}` });
    expect(after.body).toMatchObject({ status: 'succeeded', effect: 'complete' });
  });
});

describe('restarts (HA-15): only an Operation whose dispatch was possible is reconciled', () => {
  let host: TestHost;
  let form: ScriptedForm;
  let stack: ReturnType<typeof customStack>;
  beforeAll(async () => {
    host = await createTestHost();
    form = new ScriptedForm();
    stack = customStack(host, [form]);
  });

  const create = async (name: string) => {
    const res = await stack.request({
      method: 'POST',
      path: '/resources',
      body: { form: form.url, space: 'team', name, spec: {} },
      headers: { 'idempotency-key': host.newKey() },
    });
    expect(res.status).toBe(202);
    return res.body as { id: string; resourceUid: string };
  };
  const countFor = (list: { operationId: string }[], id: string) =>
    list.filter((e) => e.operationId === id).length;

  it('HA-15 after a crash during the backend call, a restarted executor reconciles and never executes again', async () => {
    const op = await create('crash-in-call');
    const hung = deferred<never>();
    const inCall = deferred();
    form.onExecute = async () => {
      inCall.resolve();
      return hung.promise; // the process "dies" inside the call
    };
    const first = stack.executor({ leaseMs: LEASE_MS });
    void first.runDue();
    await inCall.promise;
    expect((await host.store.getOperation(op.id))?.status).toBe('reconciling');

    // Before the lease ends no other executor touches it.
    const early = stack.executor({ clock: () => Date.now() + LEASE_MS / 2, leaseMs: LEASE_MS });
    expect(await early.runDue()).toBe(0);

    // "Restart": a new executor over the same table, its clock past the lease.
    form.onReconcile = async () => ({ kind: 'complete', observed: { found: true } });
    const restarted = stack.executor({ clock: () => Date.now() + LEASE_MS + 1_000, leaseMs: LEASE_MS });
    expect(await restarted.runDue()).toBe(1);
    expect(countFor(form.executed, op.id)).toBe(1);
    expect(countFor(form.reconciled, op.id)).toBe(1);
    const done = await stack.request({ path: `/operations/${op.id}` });
    expect(done.body).toMatchObject({
      status: 'succeeded',
      effect: 'complete',
      generation: 1,
      action: 'create',
    });
    expect((await stack.request({ path: `/resources/${op.resourceUid}` })).body).toMatchObject({
      phase: 'idle',
      observed: { found: true },
      observedGeneration: 1,
    });
  });

  it('HA-15 a late answer from the dead executor cannot change a terminal Operation', async () => {
    const op = await create('late-answer');
    const late = deferred<{ kind: 'no_effect'; code: string; message: string }>();
    const inCall = deferred();
    form.onExecute = async () => {
      inCall.resolve();
      return late.promise;
    };
    const first = stack.executor({ leaseMs: LEASE_MS });
    const firstRun = first.runDue();
    await inCall.promise;
    form.onReconcile = async () => ({ kind: 'complete' });
    const restarted = stack.executor({ clock: () => Date.now() + LEASE_MS + 1_000, leaseMs: LEASE_MS });
    expect(await restarted.runDue()).toBe(1);
    const settled = (await host.store.getOperation(op.id))!;
    expect(settled.status).toBe('succeeded');
    // The old executor wakes up with a contradicting answer: its lease is gone, nothing changes.
    late.resolve({ kind: 'no_effect', code: 'x', message: 'x' });
    await firstRun;
    const after = await host.store.getOperation(op.id);
    expect(after).toMatchObject({ status: 'succeeded', effect: 'complete', generation: 1, action: 'create' });
    expect(after?.updatedAt).toBe(settled.updatedAt);
    expect((await stack.request({ path: `/resources/${op.resourceUid}` })).body.phase).toBe('idle');
  });

  it('HA-15 a crash after the claim but before the dispatch mark is executed (not reconciled) after restart', async () => {
    const op = await create('crash-before-mark');
    // A claim whose process dies before markDispatch: status running, no possible dispatch.
    const claimed = await host.store.claimOperation(op.id, 'queued', newToken(), Date.now(), LEASE_MS);
    expect(claimed).toMatchObject({ status: 'running', dispatchPossible: false });
    form.onExecute = async () => ({ kind: 'complete' });
    expect(await stack.executor({ leaseMs: LEASE_MS }).runDue()).toBe(0);
    const restarted = stack.executor({ clock: () => Date.now() + LEASE_MS + 1_000, leaseMs: LEASE_MS });
    expect(await restarted.runDue()).toBe(1);
    expect(countFor(form.executed, op.id)).toBe(1);
    expect(countFor(form.reconciled, op.id)).toBe(0);
    expect((await host.store.getOperation(op.id))?.status).toBe('succeeded');
  });

  it('HA-15 a queued Operation found after a restart is executed once; reconciling ones keep reconciling', async () => {
    const op = await create('after-accept');
    // A "fresh process" executor: nothing in memory, only the table.
    form.onExecute = async () => ({ kind: 'unknown', code: 'timeout', message: 'no answer' });
    form.onReconcile = async () => ({ kind: 'unknown', code: 'timeout', message: 'no answer' });
    const fresh = new OperationExecutor({ store: host.store, forms: stack.forms, maxBackoffMs: 1 });
    expect(await fresh.runDue()).toBe(1);
    expect((await host.store.getOperation(op.id))?.status).toBe('reconciling');
    // Each later pass (and each restart) reconciles; execute is never called again.
    for (let i = 0; i < 3; i++) {
      const later = stack.executor({ clock: () => Date.now() + 10_000 * (i + 1) });
      await later.runDue();
    }
    expect(countFor(form.executed, op.id)).toBe(1);
    expect(countFor(form.reconciled, op.id)).toBe(3);
    form.onReconcile = async () => ({ kind: 'complete' });
    await stack.executor({ clock: () => Date.now() + 100_000 }).runDue();
    expect((await host.store.getOperation(op.id))?.status).toBe('succeeded');
    expect(countFor(form.executed, op.id)).toBe(1);
  });
});
