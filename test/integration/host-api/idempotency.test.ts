import { beforeAll, describe, expect, it } from 'vitest';
import { createTestHost, FORMS, type TestHost } from '../../support/host-harness.ts';
import { countLookups, customStack, expectProblem, ScriptedForm } from './helpers.ts';

const mw = (name: string, space = 'team') => ({ form: FORMS.moduleWorker, space, name, spec: {} });

describe('idempotency (HA-05) and atomic acceptance (HA-06)', () => {
  let host: TestHost;
  beforeAll(async () => {
    host = await createTestHost();
  });

  const listByName = async (name: string, space = 'team') =>
    (await host.request({ path: '/resources', query: `space=${space}&name=${name}` })).body.items as {
      uid: string;
    }[];

  it('HA-05 20 concurrent identical creates under one key make exactly one Operation and one Resource', async () => {
    const key = host.newKey();
    const results = await Promise.all(
      Array.from({ length: 20 }, () => host.create(mw('conc-same'), undefined, key)),
    );
    for (const r of results) expect([200, 202]).toContain(r.status);
    const ids = new Set(results.map((r) => r.body.id));
    const uids = new Set(results.map((r) => r.body.resourceUid));
    expect(ids.size).toBe(1);
    expect(uids.size).toBe(1);
    const items = await listByName('conc-same');
    expect(items.map((r) => r.uid)).toEqual([...uids]);
    // Exactly one Operation was accepted (and handed to the executor).
    expect(host.accepted.filter((id) => ids.has(id))).toHaveLength(1);
    await host.settle();
  });

  it('HA-05 20 concurrent creates of one name under different keys: exactly one accepted, the rest 409 name_conflict', async () => {
    const results = await Promise.all(Array.from({ length: 20 }, () => host.create(mw('conc-name'))));
    const accepted = results.filter((r) => r.status === 200 || r.status === 202);
    expect(accepted).toHaveLength(1);
    const refused = results.filter((r) => r.status !== 200 && r.status !== 202);
    expect(refused).toHaveLength(19);
    for (const r of refused) expectProblem(r, 409, 'name_conflict');
    const items = await listByName('conc-name');
    expect(items.map((r) => r.uid)).toEqual([accepted[0]?.body.resourceUid]);
    await host.settle();
  });

  it('HA-05 the same key with a different request is 409 idempotency_conflict and has no effect', async () => {
    const key = host.newKey();
    const first = await host.create(mw('conflict-a'), undefined, key);
    expect(first.status).toBe(202);
    const changed = await host.create(mw('conflict-a-changed'), undefined, key);
    expectProblem(changed, 409, 'idempotency_conflict');
    expect(await listByName('conflict-a-changed')).toEqual([]);
    // The same key at another path (an update of the Resource) is a different request as well.
    await host.settle();
    const put = await host.request({
      method: 'PUT',
      path: `/resources/${first.body.resourceUid}`,
      body: { spec: {} },
      headers: { 'idempotency-key': key, 'takoform-expected-generation': '1' },
    });
    expectProblem(put, 409, 'idempotency_conflict');
    const r = await host.request({ path: `/resources/${first.body.resourceUid}` });
    expect(r.body).toMatchObject({ generation: 1, lastOperation: first.body.id });
    // And the original request still replays.
    const replay = await host.create(mw('conflict-a'), undefined, key);
    expect(replay.status).toBe(200);
    expect(replay.body.id).toBe(first.body.id);
  });

  it('HA-05 an update or delete replayed with another expected generation is idempotency_conflict', async () => {
    const c = await host.create(mw('conflict-gen'));
    await host.settle();
    const uid = c.body.resourceUid;
    const key = host.newKey();
    const upd = await host.request({
      method: 'PUT',
      path: `/resources/${uid}`,
      body: { spec: {} },
      headers: { 'idempotency-key': key, 'takoform-expected-generation': '1' },
    });
    expect(upd.status).toBe(202);
    const other = await host.request({
      method: 'PUT',
      path: `/resources/${uid}`,
      body: { spec: {} },
      headers: { 'idempotency-key': key, 'takoform-expected-generation': '2' },
    });
    expectProblem(other, 409, 'idempotency_conflict');
    await host.settle();
  });

  it('HA-05 replays return the original Operation in its current state, also after the Resource was deleted', async () => {
    host.workers.set('team', 'replay-del');
    const createKey = host.newKey();
    const created = await host.create(mw('replay-del'), undefined, createKey);
    expect(created.status).toBe(202);
    expect(created.body.status).toBe('queued');
    await host.settle();
    const uid = created.body.resourceUid;
    const replayed = await host.create(mw('replay-del'), undefined, createKey);
    expect(replayed.status).toBe(200);
    expect(replayed.body).toMatchObject({ id: created.body.id, status: 'succeeded', effect: 'complete' });

    const deleteKey = host.newKey();
    const del = {
      method: 'DELETE',
      path: `/resources/${uid}`,
      headers: { 'idempotency-key': deleteKey, 'takoform-expected-generation': '1' },
    };
    const deleted = await host.request(del);
    expect(deleted.status).toBe(202);
    await host.settle();
    expect([404, 410]).toContain((await host.request({ path: `/resources/${uid}` })).status);

    const again = await host.request(del);
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({
      id: deleted.body.id,
      action: 'delete',
      generation: 2,
      status: 'succeeded',
      effect: 'complete',
      resourceUid: uid,
    });
    expect(again.headers.location).toBe(
      `${host.origin}/apis/forms.takoform.com/v2/operations/${deleted.body.id}`,
    );
    // The create key still replays its own Operation after the deletion.
    const createAgain = await host.create(mw('replay-del'), undefined, createKey);
    expect(createAgain.status).toBe(200);
    expect(createAgain.body.id).toBe(created.body.id);
    // A different key on the deleted uid is refused (404/410), not a new Operation.
    const fresh = await host.request({
      ...del,
      headers: { ...del.headers, 'idempotency-key': host.newKey() },
    });
    expect([404, 410]).toContain(fresh.status);
    expectProblem(fresh, fresh.status);
  });

  it('HA-05 whitespace and object key order do not distinguish requests', async () => {
    const key = host.newKey();
    const a = await host.request({
      method: 'POST',
      path: '/resources',
      rawBody: JSON.stringify(mw('spelling')),
      headers: { 'idempotency-key': key, 'content-type': 'application/json' },
    });
    expect(a.status).toBe(202);
    const b = await host.request({
      method: 'POST',
      path: '/resources',
      rawBody: ` {\n "spec" : { } ,"name":"spelling",\t"space": "team", "form": ${JSON.stringify(FORMS.moduleWorker)} } `,
      headers: { 'idempotency-key': key, 'content-type': 'application/json; charset=utf-8' },
    });
    expect([200, 202]).toContain(b.status);
    expect(b.body.id).toBe(a.body.id);
    await host.settle();
  });

  it('HA-05 idempotency keys are scoped per principal: bob reusing alice key makes his own Operation', async () => {
    const key = host.newKey();
    const alices = await host.create(mw('scoped-a'), undefined, key);
    expect(alices.status).toBe(202);
    // Same key, bob's own request: a new Operation for bob, not alice's.
    const bobs = await host.create(mw('scoped-b', 'other'), host.principals.bob, key);
    expect(bobs.status).toBe(202);
    expect(bobs.body.id).not.toBe(alices.body.id);
    expect(bobs.body.resourceUid).not.toBe(alices.body.resourceUid);
    // Same key and byte-identical request from bob: not alice's Operation (her name is taken).
    const copy = await host.create(mw('scoped-a'), host.principals.bob, host.newKey());
    expectProblem(copy, 409, 'name_conflict');
    const sameKeyCopy = await host.create(mw('scoped-a'), host.principals.bob, key);
    expectProblem(sameKeyCopy, 409, 'idempotency_conflict');
    expect(JSON.stringify(sameKeyCopy.body)).not.toContain(alices.body.id);
    // alice's replay is unaffected.
    expect((await host.create(mw('scoped-a'), undefined, key)).body.id).toBe(alices.body.id);
    await host.settle();
  });

  it('HA-05 20 concurrent identical updates (and deletes) under one key make exactly one Operation', async () => {
    const c = await host.create(mw('conc-upd'));
    await host.settle();
    const uid = c.body.resourceUid;
    for (const [method, gen] of [
      ['PUT', '1'],
      ['DELETE', '2'],
    ] as const) {
      const key = host.newKey();
      const results = await Promise.all(
        Array.from({ length: 20 }, () =>
          host.request({
            method,
            path: `/resources/${uid}`,
            body: method === 'PUT' ? { spec: {} } : undefined,
            headers: { 'idempotency-key': key, 'takoform-expected-generation': gen },
          }),
        ),
      );
      for (const r of results) expect([200, 202]).toContain(r.status);
      expect(new Set(results.map((r) => r.body.id)).size).toBe(1);
      expect(results[0]?.body).toMatchObject({ generation: Number(gen) + 1 });
      const res = await host.store.getResource(uid);
      expect(res?.generation).toBe(Number(gen) + 1);
      await host.settle();
    }
  });

  it('HA-05 a replay is answered before the busy and generation checks', async () => {
    const c = await host.create(mw('replay-order'));
    await host.settle();
    const uid = c.body.resourceUid;
    const k1 = host.newKey();
    const put = (key: string, gen: string) =>
      host.request({
        method: 'PUT',
        path: `/resources/${uid}`,
        body: { spec: {} },
        headers: { 'idempotency-key': key, 'takoform-expected-generation': gen },
      });
    const first = await put(k1, '1');
    expect(first.status).toBe(202);
    await host.settle();
    const second = await put(host.newKey(), '2');
    expect(second.status).toBe(202);
    // The Resource is now busy and at generation 3; the first request still replays.
    const replay = await put(k1, '1');
    expect(replay.status).toBe(200);
    expect(replay.body).toMatchObject({ id: first.body.id, generation: 2, status: 'succeeded' });
    await host.settle();
    const later = await put(k1, '1');
    expect(later.body.id).toBe(first.body.id);
  });

  it('HA-06 a create refused inside the transaction (name taken) registers no key and no Operation', async () => {
    const original = await host.create(mw('atomic'));
    await host.settle();
    const key = host.newKey();
    const acceptedBefore = host.accepted.length;
    expectProblem(await host.create(mw('atomic'), undefined, key), 409, 'name_conflict');
    expect(host.accepted.length).toBe(acceptedBefore);
    expect(await host.store.getIdempotency('alice', key)).toBeUndefined();
    // Free the name: the same key and request now make a new Resource (nothing was half-written).
    await host.request({
      method: 'DELETE',
      path: `/resources/${original.body.resourceUid}`,
      headers: { 'idempotency-key': host.newKey(), 'takoform-expected-generation': '1' },
    });
    await host.settle();
    const retried = await host.create(mw('atomic'), undefined, key);
    expect(retried.status).toBe(202);
    expect(retried.body.resourceUid).not.toBe(original.body.resourceUid);
    await host.settle();
  });

  it('HA-06 acceptance is durable before any backend effect: pending Resource, queued Operation, no backend call', async () => {
    const lookups = countLookups(host);
    host.workers.set('team', 'accept-first');
    const key = host.newKey();
    const created = await host.create(mw('accept-first'), undefined, key);
    expect(created.status).toBe(202);
    const uid = created.body.resourceUid;
    // Every part of the acceptance is already in the table, read straight from the store.
    const resource = await host.store.getResource(uid);
    expect(resource).toMatchObject({
      phase: 'pending',
      generation: 1,
      observedGeneration: 0,
      lastOperation: created.body.id,
      busyOperation: created.body.id,
    });
    const op = await host.store.getOperation(created.body.id);
    expect(op).toMatchObject({ status: 'queued', effect: 'none', dispatchPossible: false, attempts: 0 });
    expect(await host.store.getIdempotency('alice', key)).toMatchObject({ operationId: created.body.id });
    expect(await listByName('accept-first')).toHaveLength(1);
    // The name is reserved by the acceptance itself.
    expectProblem(await host.create(mw('accept-first')), 409, 'name_conflict');
    expect(lookups.calls).toBe(0);
    await host.settle();
    expect(lookups.calls).toBe(1);
  });

  it('HA-06 a refused create leaves nothing behind: no key mapping, no name reservation', async () => {
    const key = host.newKey();
    const bad = await host.create({ ...mw('refused-spec'), spec: { x: 1 } }, undefined, key);
    expectProblem(bad, 422, 'invalid_spec');
    expect(await host.store.getIdempotency('alice', key)).toBeUndefined();
    // The key and the name are both still free.
    const ok = await host.create(mw('refused-spec'), undefined, key);
    expect(ok.status).toBe(202);
    await host.settle();
  });
});

describe('HA-05 number spelling in request equality', () => {
  it('HA-05 1 and 1.0e0 in a body are the same request; 2 is not (AtLeastOnceQueue deliveryDelaySeconds)', async () => {
    // ModuleWorker's spec must be exactly {}, so the number lives in an AtLeastOnceQueue spec.
    const host = await createTestHost();
    const key = host.newKey();
    const post = (delay: string, retention = '3600') =>
      host.request({
        method: 'POST',
        path: '/resources',
        rawBody: `{"form":${JSON.stringify(FORMS.queue)},"space":"team","name":"num-q","spec":{"messageRetentionSeconds":${retention},"deliveryDelaySeconds":${delay}}}`,
        headers: { 'idempotency-key': key, 'content-type': 'application/json' },
      });
    const first = await post('1');
    expect(first.status).toBe(202);
    for (const [delay, retention] of [
      ['1.0e0', '3600'],
      ['1.0', '3.6e3'],
      ['10e-1', '3600.000'],
      ['1E0', '36E2'],
      ['100e-2', '360000e-2'],
    ] as const) {
      const res = await post(delay, retention);
      expect(res.status).toBe(202);
      expect(res.body.id).toBe(first.body.id);
    }
    expectProblem(await post('2'), 409, 'idempotency_conflict');
    expectProblem(await post('1', '3601'), 409, 'idempotency_conflict');
    const r = await host.request({ path: `/resources/${first.body.resourceUid}` });
    expect(r.body.spec).toEqual({ messageRetentionSeconds: 3600, deliveryDelaySeconds: 1 });
    expect(host.accepted.filter((id) => id === first.body.id)).toHaveLength(1);
  });

  it('HA-05 number equality also holds for a Form that takes any number (real engine, test Form)', async () => {
    const host = await createTestHost();
    const form = new ScriptedForm();
    const stack = customStack(host, [form]);
    const key = host.newKey();
    const post = (n: string) =>
      stack.request({
        method: 'POST',
        path: '/resources',
        rawBody: `{"form":${JSON.stringify(form.url)},"space":"team","name":"num","spec":{"n":${n}}}`,
        headers: { 'idempotency-key': key, 'content-type': 'application/json' },
      });
    const first = await post('-0.125');
    expect(first.status).toBe(202);
    for (const spelling of ['-1.25e-1', '-0.1250', '-125e-3']) {
      const res = await post(spelling);
      expect(res.status).toBe(202);
      expect(res.body.id).toBe(first.body.id);
    }
    expectProblem(await post('0.125'), 409, 'idempotency_conflict');
    expectProblem(await post('-0.12500001'), 409, 'idempotency_conflict');
  });
});
