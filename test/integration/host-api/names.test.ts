import { beforeAll, describe, expect, it } from 'vitest';
import { createTestHost, FORMS, type TestHost } from '../../support/host-harness.ts';
import { customStack, expectProblem, ScriptedForm } from './helpers.ts';

const mw = (name: string, space = 'team') => ({ form: FORMS.moduleWorker, space, name, spec: {} });

describe('names, uids and reservations (HA-08)', () => {
  let host: TestHost;
  beforeAll(async () => {
    host = await createTestHost();
  });

  const deleteAt = (uid: string, generation: number) =>
    host.request({
      method: 'DELETE',
      path: `/resources/${uid}`,
      headers: { 'idempotency-key': host.newKey(), 'takoform-expected-generation': `${generation}` },
    });

  it('HA-08 a name in use is 409 name_conflict and never replaces the existing Resource', async () => {
    const first = await host.create(mw('taken'));
    expect(first.status).toBe(202);
    await host.settle();
    const again = await host.create(mw('taken'));
    expectProblem(again, 409, 'name_conflict');
    // Another principal with write access to the Space meets the same reservation.
    expectProblem(await host.create(mw('taken'), host.principals.bob), 409, 'name_conflict');
    const r = await host.request({ path: `/resources/${first.body.resourceUid}` });
    expect(r.body).toMatchObject({ generation: 1, lastOperation: first.body.id, phase: 'idle' });
  });

  it('HA-08 the name stays reserved while a delete runs and is released when it succeeds; a new uid follows', async () => {
    const first = await host.create(mw('reuse'));
    await host.settle();
    const oldUid = first.body.resourceUid;
    const del = await deleteAt(oldUid, 1);
    expect(del.status).toBe(202);
    // The delete is unfinished (the executor does not run).
    expectProblem(await host.create(mw('reuse')), 409, 'name_conflict');
    const listed = await host.request({ path: '/resources', query: 'space=team&name=reuse' });
    expect(listed.body.items.map((r: { uid: string; phase: string }) => [r.uid, r.phase])).toEqual([
      [oldUid, 'deleting'],
    ]);
    await host.settle();
    const again = await host.create(mw('reuse'));
    expect(again.status).toBe(202);
    expect(again.body.resourceUid).not.toBe(oldUid);
    expect(again.body.generation).toBe(1);
    await host.settle();
    // The old uid stays dead: it is not reused and does not come back.
    expect([404, 410]).toContain((await host.request({ path: `/resources/${oldUid}` })).status);
    const list = await host.request({ path: '/resources', query: 'space=team&name=reuse' });
    expect(list.body.items.map((r: { uid: string }) => r.uid)).toEqual([again.body.resourceUid]);
    // Deleting and recreating again yields a third, distinct uid.
    await deleteAt(again.body.resourceUid, 1);
    await host.settle();
    const third = await host.create(mw('reuse'));
    expect(new Set([oldUid, again.body.resourceUid, third.body.resourceUid]).size).toBe(3);
    await host.settle();
  });

  it('HA-08 a failed delete keeps the Resource and its name reserved', async () => {
    const form = new ScriptedForm();
    const stack = customStack(host, [form]);
    const post = (name: string) =>
      stack.request({
        method: 'POST',
        path: '/resources',
        body: { form: form.url, space: 'team', name, spec: {} },
        headers: { 'idempotency-key': host.newKey() },
      });
    const created = await post('keep-on-fail');
    const run = async () => {
      while ((await stack.executor().runDue()) > 0) {}
    };
    await run();
    const uid = created.body.resourceUid;
    form.onExecute = async (e) =>
      e.action === 'delete'
        ? { kind: 'no_effect', code: 'refused', message: 'the backend refused' }
        : { kind: 'complete' };
    const del = await stack.request({
      method: 'DELETE',
      path: `/resources/${uid}`,
      headers: { 'idempotency-key': host.newKey(), 'takoform-expected-generation': '1' },
    });
    expect(del.status).toBe(202);
    await run();
    const op = await stack.request({ path: `/operations/${del.body.id}` });
    expect(op.body).toMatchObject({ status: 'failed', effect: 'none' });
    const r = await stack.request({ path: `/resources/${uid}` });
    expect(r.body).toMatchObject({ phase: 'error', generation: 2 });
    expectProblem(await post('keep-on-fail'), 409, 'name_conflict');
    const listed = await stack.request({ path: '/resources', query: 'name=keep-on-fail' });
    expect(listed.body.items.map((x: { uid: string }) => x.uid)).toEqual([uid]);
  });

  it('HA-08 the same name in another Space is a different Resource', async () => {
    const a = await host.create(mw('shared-name', 'team'));
    const b = await host.create(mw('shared-name', 'other'), host.principals.bob);
    expect(a.status).toBe(202);
    expect(b.status).toBe(202);
    expect(a.body.resourceUid).not.toBe(b.body.resourceUid);
    await host.settle();
  });

  it('HA-08 uids are distinct across many creates and never reused', async () => {
    const results = await Promise.all(Array.from({ length: 15 }, (_, i) => host.create(mw(`many-${i}`))));
    const uids = results.map((r) => r.body.resourceUid as string);
    expect(new Set(uids).size).toBe(uids.length);
    for (const uid of uids) expect(uid).toMatch(/^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/);
    await host.settle();
  });

  it('HA-08 (space, name) is unique across Forms: ModuleWorker and AtLeastOnceQueue share one namespace', async () => {
    const queue = (name: string) => ({
      form: FORMS.queue,
      space: 'team',
      name,
      spec: { messageRetentionSeconds: 3600 },
    });
    const worker = await host.create(mw('cross-form'));
    expect(worker.status).toBe(202);
    expectProblem(await host.create(queue('cross-form')), 409, 'name_conflict');
    const q = await host.create(queue('cross-form-2'));
    expect(q.status).toBe(202);
    expectProblem(await host.create(mw('cross-form-2')), 409, 'name_conflict');
    // The same holds for a Form this Host does not ship (real engine over the same store).
    const other = new ScriptedForm();
    const stack = customStack(host, [other]);
    const clash = await stack.request({
      method: 'POST',
      path: '/resources',
      body: { form: other.url, space: 'team', name: 'cross-form', spec: {} },
      headers: { 'idempotency-key': host.newKey() },
    });
    expectProblem(clash, 409, 'name_conflict');
    const list = await host.request({ path: '/resources', query: 'space=team&name=cross-form' });
    expect(list.body.items.map((r: { form: string }) => r.form)).toEqual([FORMS.moduleWorker]);
  });
});
