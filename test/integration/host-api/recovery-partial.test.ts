import { beforeAll, describe, expect, it } from 'vitest';
import { createTestHost, type TestHost } from '../../support/host-harness.ts';
import { customStack, ScriptedForm } from './helpers.ts';

/**
 * RC-03: a partial effect and an unknown outcome stay visible, and converge through a PUT or a
 * DELETE on the same uid — never by the Host silently redoing or dropping the Operation.
 */
describe('RC-03 partial and unknown outcomes converge on the same uid', () => {
  let host: TestHost;
  let form: ScriptedForm;
  let stack: ReturnType<typeof customStack>;
  beforeAll(async () => {
    host = await createTestHost();
    form = new ScriptedForm();
    stack = customStack(host, [form]);
  });

  const run = async () => {
    const ex = stack.executor();
    for (let i = 0; i < 10 && (await ex.runDue()) > 0; i++);
  };
  const create = (name: string) =>
    stack.request({
      method: 'POST',
      path: '/resources',
      body: { form: form.url, space: 'team', name, spec: { n: 1 } },
      headers: { 'idempotency-key': host.newKey() },
    });
  const mutate = (method: 'PUT' | 'DELETE', uid: string, generation: number) =>
    stack.request({
      method,
      path: `/resources/${uid}`,
      ...(method === 'PUT' ? { body: { spec: { n: 2 } } } : {}),
      headers: { 'idempotency-key': host.newKey(), 'takoform-expected-generation': String(generation) },
    });

  it('RC-03 a partial create stays failed/partial with phase error, then a PUT on the same uid repairs it', async () => {
    form.onExecute = async () => ({
      kind: 'partial',
      code: 'half_made',
      message: 'one of two parts exists',
      observed: { parts: 1 },
    });
    const created = await create('half');
    await run();
    const op = await stack.request({ path: `/operations/${created.body.id}` });
    expect(op.body).toMatchObject({ status: 'failed', effect: 'partial', error: { code: 'half_made' } });
    const failed = await stack.request({ path: `/resources/${created.body.resourceUid}` });
    expect(failed.body).toMatchObject({
      phase: 'error',
      generation: 1,
      observedGeneration: 0,
      observed: { parts: 1 },
    });

    form.onExecute = async () => ({ kind: 'complete', observed: { parts: 2 } });
    const put = await mutate('PUT', created.body.resourceUid, 1);
    expect(put.status).toBe(202);
    await run();
    const repaired = await stack.request({ path: `/resources/${created.body.resourceUid}` });
    expect(repaired.body).toMatchObject({
      uid: created.body.resourceUid,
      phase: 'idle',
      generation: 2,
      observedGeneration: 2,
      observed: { parts: 2 },
    });
  });

  it('RC-03 a partial create can instead be cleaned up by a DELETE on the same uid, releasing its name', async () => {
    form.onExecute = async (e) =>
      e.action === 'create'
        ? { kind: 'partial', code: 'half_made', message: 'one of two parts exists' }
        : { kind: 'complete', observed: {} };
    const created = await create('half-delete');
    await run();
    const del = await mutate('DELETE', created.body.resourceUid, 1);
    expect(del.status).toBe(202);
    await run();
    expect((await stack.request({ path: `/operations/${del.body.id}` })).body).toMatchObject({
      status: 'succeeded',
      effect: 'complete',
    });
    expect([404, 410]).toContain(
      (await stack.request({ path: `/resources/${created.body.resourceUid}` })).status,
    );
    form.onExecute = async () => ({ kind: 'complete', observed: {} });
    expect((await create('half-delete')).status).toBe(202); // the name is free again
    await run();
  });

  it('RC-03 an unknown outcome stays reconciling (no new Operation is accepted meanwhile) until reconcile settles it', async () => {
    let known = false;
    form.onExecute = async () => ({
      kind: 'unknown',
      code: 'timeout',
      message: 'no answer from the backend',
    });
    form.onReconcile = async () =>
      known ? { kind: 'complete', observed: { ok: true } } : { kind: 'unknown' };
    const created = await create('unknown');
    await run();
    const op = await stack.request({ path: `/operations/${created.body.id}` });
    expect(op.body).toMatchObject({ status: 'reconciling', effect: 'unknown' });
    expect((await mutate('PUT', created.body.resourceUid, 1)).body).toMatchObject({ code: 'resource_busy' });

    known = true;
    // Reconcile retries with backoff: run with a clock past any backoff.
    const later = stack.executor({ clock: () => Date.now() + 120_000 });
    for (let i = 0; i < 5 && (await later.runDue()) > 0; i++);
    expect((await stack.request({ path: `/operations/${created.body.id}` })).body).toMatchObject({
      status: 'succeeded',
      effect: 'complete',
    });
    expect(form.executed.filter((e) => e.resourceUid === created.body.resourceUid)).toHaveLength(1);
    form.onReconcile = async () => ({ kind: 'complete', observed: { ok: true } });
  });
});
