import { beforeAll, describe, expect, it } from 'vitest';
import { createTestHost, FORMS, type TestHost } from '../../support/host-harness.ts';
import { customStack, expectProblem, ScriptedForm } from './helpers.ts';

const mw = (name: string) => ({ form: FORMS.moduleWorker, space: 'team', name, spec: {} });

describe('Idempotency-Key and generation headers (HA-04), generations (HA-07)', () => {
  let host: TestHost;
  beforeAll(async () => {
    host = await createTestHost();
  });

  /** A settled Resource at generation 1. */
  const settled = async (name: string) => {
    const c = await host.create(mw(name));
    expect(c.status).toBe(202);
    await host.settle();
    return c.body.resourceUid as string;
  };

  const put = (uid: string, headers: Record<string, string | string[]>, spec: unknown = {}) =>
    host.request({ method: 'PUT', path: `/resources/${uid}`, body: { spec }, headers });
  const del = (uid: string, headers: Record<string, string | string[]>) =>
    host.request({ method: 'DELETE', path: `/resources/${uid}`, headers });

  it('HA-04 create, update and delete without an Idempotency-Key are 400 invalid_request', async () => {
    const uid = await settled('no-key');
    expectProblem(
      await host.request({ method: 'POST', path: '/resources', body: mw('no-key-2') }),
      400,
      'invalid_request',
    );
    expectProblem(await put(uid, { 'takoform-expected-generation': '1' }), 400, 'invalid_request');
    expectProblem(await del(uid, { 'takoform-expected-generation': '1' }), 400, 'invalid_request');
    const r = await host.request({ path: `/resources/${uid}` });
    expect(r.body.generation).toBe(1);
    expect((await host.request({ path: '/resources', query: 'name=no-key-2' })).body.items).toEqual([]);
  });

  it('HA-04 malformed Idempotency-Keys are 400; the grammar boundaries are exact', async () => {
    const bad = [
      'a'.repeat(15), // too short
      'a'.repeat(129), // too long
      `-${'a'.repeat(20)}`, // must start with an alphanumeric
      `.${'a'.repeat(20)}`,
      'abcdefghijklmnop q', // space
      'abcdefghijklmnop/q',
      'abcdefghijklmnopé',
      '',
    ];
    for (const key of bad) {
      const res = await host.request({
        method: 'POST',
        path: '/resources',
        body: mw('bad-key'),
        headers: { 'idempotency-key': key },
      });
      expectProblem(res, 400, 'invalid_request');
    }
    // Sent twice: ambiguous, refused.
    const twice = await host.request({
      method: 'POST',
      path: '/resources',
      body: mw('bad-key'),
      headers: { 'idempotency-key': ['a'.repeat(20), 'b'.repeat(20)] },
    });
    expectProblem(twice, 400, 'invalid_request');
    expect((await host.request({ path: '/resources', query: 'name=bad-key' })).body.items).toEqual([]);
    // 16 and 128 characters, with every allowed punctuation mark, are fine.
    const okShort = await host.create(mw('key-16'), undefined, 'A1._:-bcdefghijk');
    expect(okShort.status).toBe(202);
    const okLong = await host.create(mw('key-128'), undefined, `Z${'9._:-'.repeat(25)}abc`.slice(0, 128));
    expect(okLong.status).toBe(202);
    await host.settle();
  });

  it('HA-04 update and delete without Takoform-Expected-Generation are 428 expected_generation_required', async () => {
    const uid = await settled('no-gen');
    const p = await put(uid, { 'idempotency-key': host.newKey() });
    expectProblem(p, 428, 'expected_generation_required');
    const d = await del(uid, { 'idempotency-key': host.newKey() });
    expectProblem(d, 428, 'expected_generation_required');
    expect((await host.request({ path: `/resources/${uid}` })).body).toMatchObject({
      generation: 1,
      phase: 'idle',
    });
  });

  it('HA-04 non-canonical generation values are 400', async () => {
    const uid = await settled('bad-gen');
    for (const g of ['01', '+1', '-1', '1.0', ' 1', 'one', '', '1e0', '99999999999999999999']) {
      expectProblem(
        await put(uid, { 'idempotency-key': host.newKey(), 'takoform-expected-generation': g }),
        400,
        'invalid_request',
      );
    }
    expectProblem(
      await put(uid, { 'idempotency-key': host.newKey(), 'takoform-expected-generation': ['1', '1'] }),
      400,
      'invalid_request',
    );
    expect((await host.request({ path: `/resources/${uid}` })).body.generation).toBe(1);
  });

  it('HA-04 a stale generation and generation 0 are 409 generation_conflict and change nothing', async () => {
    const uid = await settled('stale');
    const createOp = (await host.request({ path: `/resources/${uid}` })).body.lastOperation;
    for (const g of ['0', '2', '7']) {
      expectProblem(
        await put(uid, { 'idempotency-key': host.newKey(), 'takoform-expected-generation': g }),
        409,
        'generation_conflict',
      );
      expectProblem(
        await del(uid, { 'idempotency-key': host.newKey(), 'takoform-expected-generation': g }),
        409,
        'generation_conflict',
      );
    }
    expect((await host.request({ path: `/resources/${uid}` })).body).toMatchObject({
      generation: 1,
      lastOperation: createOp,
      phase: 'idle',
    });
    // After an update to generation 2, generation 1 is stale too.
    const upd = await put(uid, { 'idempotency-key': host.newKey(), 'takoform-expected-generation': '1' });
    expect(upd.status).toBe(202);
    await host.settle();
    expectProblem(
      await put(uid, { 'idempotency-key': host.newKey(), 'takoform-expected-generation': '1' }),
      409,
      'generation_conflict',
    );
    const d = await del(uid, { 'idempotency-key': host.newKey(), 'takoform-expected-generation': '2' });
    expect(d.status).toBe(202);
    expect(d.body).toMatchObject({ action: 'delete', generation: 3 });
    await host.settle();
  });

  it('HA-07 create is generation 1; each accepted update and delete adds 1, identical spec included', async () => {
    const created = await host.create(mw('gens'));
    expect(created.body).toMatchObject({ action: 'create', generation: 1 });
    await host.settle();
    const uid = created.body.resourceUid;
    const ids = [created.body.id];
    for (const gen of [1, 2, 3]) {
      const res = await put(uid, {
        'idempotency-key': host.newKey(),
        'takoform-expected-generation': `${gen}`,
      });
      expect(res.status).toBe(202);
      expect(res.body).toMatchObject({ action: 'update', generation: gen + 1, resourceUid: uid });
      expect(ids).not.toContain(res.body.id);
      ids.push(res.body.id);
      const r = await host.request({ path: `/resources/${uid}` });
      expect(r.body).toMatchObject({ generation: gen + 1, lastOperation: res.body.id, phase: 'pending' });
      await host.settle();
      const after = await host.request({ path: `/resources/${uid}` });
      expect(after.body).toMatchObject({ generation: gen + 1, observedGeneration: gen + 1, phase: 'idle' });
    }
    const d = await del(uid, { 'idempotency-key': host.newKey(), 'takoform-expected-generation': '4' });
    expect(d.body).toMatchObject({ action: 'delete', generation: 5 });
    const deleting = await host.request({ path: `/resources/${uid}` });
    expect(deleting.body).toMatchObject({ generation: 5, phase: 'deleting', lastOperation: d.body.id });
    await host.settle();
  });

  it('HA-07 one unfinished mutation per uid: a second update or delete is 409 resource_busy', async () => {
    const created = await host.create(mw('busy'));
    const uid = created.body.resourceUid;
    // While the create is unfinished.
    expectProblem(
      await put(uid, { 'idempotency-key': host.newKey(), 'takoform-expected-generation': '1' }),
      409,
      'resource_busy',
    );
    await host.settle();
    const first = await put(uid, { 'idempotency-key': host.newKey(), 'takoform-expected-generation': '1' });
    expect(first.status).toBe(202);
    // The executor does not run: the update stays unfinished.
    for (const g of ['2', '1']) {
      expectProblem(
        await put(uid, { 'idempotency-key': host.newKey(), 'takoform-expected-generation': g }),
        409,
        'resource_busy',
      );
      expectProblem(
        await del(uid, { 'idempotency-key': host.newKey(), 'takoform-expected-generation': g }),
        409,
        'resource_busy',
      );
    }
    const r = await host.request({ path: `/resources/${uid}` });
    expect(r.body).toMatchObject({ generation: 2, lastOperation: first.body.id });
    await host.settle();
    const next = await put(uid, { 'idempotency-key': host.newKey(), 'takoform-expected-generation': '2' });
    expect(next.status).toBe(202);
    expect(next.body.generation).toBe(3);
    await host.settle();
  });

  it('HA-07 concurrent updates at one generation under different keys: exactly one accepted', async () => {
    const uid = await settled('conc-upd');
    const results = await Promise.all(
      Array.from({ length: 10 }, () =>
        put(uid, { 'idempotency-key': host.newKey(), 'takoform-expected-generation': '1' }),
      ),
    );
    const ok = results.filter((r) => r.status === 202 || r.status === 200);
    expect(ok).toHaveLength(1);
    for (const r of results.filter((x) => x.status !== 202 && x.status !== 200)) {
      expect(r.status).toBe(409);
      expect(['resource_busy', 'generation_conflict']).toContain(r.body.code);
    }
    const res = await host.request({ path: `/resources/${uid}` });
    expect(res.body).toMatchObject({ generation: 2, lastOperation: ok[0]?.body.id });
    await host.settle();
  });

  it('HA-07 an accepted update that fails still consumed its generation; nothing rolls back', async () => {
    const form = new ScriptedForm();
    const stack = customStack(host, [form]);
    const run = async () => {
      while ((await stack.executor().runDue()) > 0) {}
    };
    const created = await stack.request({
      method: 'POST',
      path: '/resources',
      body: { form: form.url, space: 'team', name: 'fails-later', spec: { n: 1 } },
      headers: { 'idempotency-key': host.newKey() },
    });
    await run();
    const uid = created.body.resourceUid;
    form.onExecute = async () => ({ kind: 'no_effect', code: 'rejected', message: 'the backend said no' });
    const upd = await stack.request({
      method: 'PUT',
      path: `/resources/${uid}`,
      body: { spec: { n: 2 } },
      headers: { 'idempotency-key': host.newKey(), 'takoform-expected-generation': '1' },
    });
    expect(upd.body.generation).toBe(2);
    await run();
    expect((await stack.request({ path: `/operations/${upd.body.id}` })).body.status).toBe('failed');
    const r = await stack.request({ path: `/resources/${uid}` });
    expect(r.body).toMatchObject({
      generation: 2,
      observedGeneration: 1,
      phase: 'error',
      lastOperation: upd.body.id,
    });
    expectProblem(
      await stack.request({
        method: 'PUT',
        path: `/resources/${uid}`,
        body: { spec: { n: 3 } },
        headers: { 'idempotency-key': host.newKey(), 'takoform-expected-generation': '1' },
      }),
      409,
      'generation_conflict',
    );
    form.onExecute = async () => ({ kind: 'complete' });
    const fix = await stack.request({
      method: 'PUT',
      path: `/resources/${uid}`,
      body: { spec: { n: 3 } },
      headers: { 'idempotency-key': host.newKey(), 'takoform-expected-generation': '2' },
    });
    expect(fix.body.generation).toBe(3);
    await run();
    expect((await stack.request({ path: `/resources/${uid}` })).body).toMatchObject({
      generation: 3,
      observedGeneration: 3,
      phase: 'idle',
      spec: { n: 3 },
    });
  });

  it('HA-07 an update with an invalid spec is refused (422) without consuming a generation', async () => {
    const uid = await settled('bad-spec-upd');
    expectProblem(
      await put(uid, { 'idempotency-key': host.newKey(), 'takoform-expected-generation': '1' }, { x: 1 }),
      422,
      'invalid_spec',
    );
    expect((await host.request({ path: `/resources/${uid}` })).body.generation).toBe(1);
  });
});
