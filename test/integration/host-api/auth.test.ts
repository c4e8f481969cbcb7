import { randomBytes } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  createTestHost,
  FORMS,
  type RequestOptions,
  type TestHost,
  type TestPrincipal,
} from '../../support/host-harness.ts';
import { expectProblem } from './helpers.ts';

const token = (who: string) => `${who}-${randomBytes(24).toString('hex')}`;

/** The harness's three principals, plus a read-only key of alice's own principal (takoserver's model). */
const alice: TestPrincipal = {
  id: 'alice',
  token: token('alice'),
  spaces: { team: 'write', shared: 'read' },
};
const aliceReadOnly: TestPrincipal = {
  id: 'alice',
  token: token('alice-ro'),
  spaces: { team: 'read', shared: 'read' },
};
const aliceSecondKey: TestPrincipal = {
  id: 'alice',
  token: token('alice-2'),
  spaces: { team: 'write', shared: 'read' },
};
const bob: TestPrincipal = { id: 'bob', token: token('bob'), spaces: { team: 'write', other: 'write' } };
const reader: TestPrincipal = { id: 'reader', token: token('reader'), spaces: { team: 'read' } };

describe('authentication and authorization', () => {
  let host: TestHost;
  let uid: string;
  let opId: string;
  let createKey: string;
  const createBody = { form: FORMS.moduleWorker, space: 'team', name: 'auth-w1', spec: {} };

  beforeAll(async () => {
    host = await createTestHost({ principals: [alice, bob, reader, aliceReadOnly, aliceSecondKey] });
    host.workers.set('team', 'auth-w1');
    createKey = host.newKey();
    const created = await host.create(createBody, alice, createKey);
    expect(created.status).toBe(202);
    uid = created.body.resourceUid;
    opId = created.body.id;
    await host.settle();
  });

  const probes = (): RequestOptions[] => [
    { method: 'GET', path: '/resources' },
    { method: 'GET', path: `/resources/${uid}` },
    { method: 'GET', path: `/operations/${opId}` },
    { method: 'GET', path: '/support', query: `form=${encodeURIComponent(FORMS.moduleWorker)}` },
    { method: 'POST', path: '/resources', body: createBody, headers: { 'idempotency-key': host.newKey() } },
    {
      method: 'PUT',
      path: `/resources/${uid}`,
      body: { spec: {} },
      headers: { 'idempotency-key': host.newKey(), 'takoform-expected-generation': '1' },
    },
    {
      method: 'DELETE',
      path: `/resources/${uid}`,
      headers: { 'idempotency-key': host.newKey(), 'takoform-expected-generation': '1' },
    },
    { method: 'GET', path: '/resources/does-not-exist' },
    { method: 'GET', path: '/no/such/route' },
  ];

  it('HA-03 refuses missing, garbage and Basic credentials with 401, WWW-Authenticate and no-store', async () => {
    const variants: (Record<string, string> | undefined)[] = [
      undefined,
      { authorization: 'Bearer not-a-known-key-0000000000000000000000' },
      { authorization: `Basic ${Buffer.from(`alice:${alice.token}`).toString('base64')}` },
      { authorization: `bearer${alice.token}` },
      { authorization: `Bearer ${alice.token} extra` },
      { authorization: 'Bearer ' },
      { authorization: alice.token },
    ];
    for (const headers of variants) {
      for (const probe of probes()) {
        const res = await host.request({ ...probe, as: null, headers: { ...probe.headers, ...headers } });
        expectProblem(res, 401, 'unauthenticated');
        expect(res.headers['www-authenticate']).toMatch(/^Bearer\b/);
        expect(res.headers['cache-control']).toBe('no-store');
      }
    }
    // Nothing was created or changed by the refused writes.
    const r = await host.request({ path: `/resources/${uid}` });
    expect(r.body).toMatchObject({ generation: 1, lastOperation: opId });
  });

  it('HA-03 a read-only key of the same principal reads (200) but every write is 403 forbidden, replays included', async () => {
    const asRo = { as: aliceReadOnly };
    expect((await host.request({ path: `/resources/${uid}`, ...asRo })).status).toBe(200);
    expect((await host.request({ path: `/operations/${opId}`, ...asRo })).status).toBe(200);
    const list = await host.request({ path: '/resources', query: 'space=team', ...asRo });
    expect(list.status).toBe(200);
    expect(list.body.items.map((r: { uid: string }) => r.uid)).toContain(uid);

    // A fresh create, the replay of alice's writer key, an update and a delete.
    expectProblem(
      await host.create({ ...createBody, name: 'ro-new' }, aliceReadOnly, host.newKey()),
      403,
      'forbidden',
    );
    const replay = await host.create(createBody, aliceReadOnly, createKey);
    expectProblem(replay, 403, 'forbidden');
    expect(JSON.stringify(replay.body)).not.toContain(opId);
    for (const method of ['PUT', 'DELETE']) {
      const res = await host.request({
        method,
        path: `/resources/${uid}`,
        body: method === 'PUT' ? { spec: {} } : undefined,
        headers: { 'idempotency-key': host.newKey(), 'takoform-expected-generation': '1' },
        ...asRo,
      });
      expectProblem(res, 403, 'forbidden');
    }
    const r = await host.request({ path: `/resources/${uid}` });
    expect(r.body).toMatchObject({ generation: 1, lastOperation: opId, phase: 'idle' });
  });

  it('HA-03 a read-only key replaying a writer update or delete key gets 403, not the Operation', async () => {
    const w = await host.create({ ...createBody, name: 'ro-replay' }, alice);
    await host.settle();
    const key = host.newKey();
    const put = {
      method: 'PUT',
      path: `/resources/${w.body.resourceUid}`,
      body: { spec: {} },
      headers: { 'idempotency-key': key, 'takoform-expected-generation': '1' },
    };
    const original = await host.request({ ...put, as: alice });
    expect(original.status).toBe(202);
    const replay = await host.request({ ...put, as: aliceReadOnly });
    expectProblem(replay, 403, 'forbidden');
    expect(JSON.stringify(replay.body)).not.toContain(original.body.id);
    // The writer's own replay still returns the original id.
    const again = await host.request({ ...put, as: alice });
    expect(again.body.id).toBe(original.body.id);
    await host.settle();
  });

  it('HA-03 HA-05 keys are scoped to the principal, not the credential: a second writer key replays the same Operation', async () => {
    const replay = await host.create(createBody, aliceSecondKey, createKey);
    expect(replay.status).toBe(200);
    expect(replay.body.id).toBe(opId);
    const changed = await host.create({ ...createBody, name: 'other-name' }, aliceSecondKey, createKey);
    expectProblem(changed, 409, 'idempotency_conflict');
    // Both keys see and manage the same Resources.
    expect((await host.request({ path: `/resources/${uid}`, as: aliceSecondKey })).status).toBe(200);
  });

  it('HA-03 concurrent writer and read-only creates of one request give [202, 403]', async () => {
    const body = { ...createBody, name: 'race-rw' };
    const [w, r] = await Promise.all([host.create(body, alice), host.create(body, aliceReadOnly)]);
    expect(w.status).toBe(202);
    expectProblem(r, 403, 'forbidden');
    await host.settle();
  });

  it('HA-03 the harness reader principal (team:read) reads lists and support but cannot create in team', async () => {
    const list = await host.request({ path: '/resources', query: 'space=team', as: reader });
    expect(list.status).toBe(200);
    // alice's Resources are not the reader's: never listed to another principal.
    expect(list.body).toEqual({ items: [], nextCursor: null });
    const support = await host.request({
      path: '/support',
      query: `form=${encodeURIComponent(FORMS.moduleWorker)}`,
      as: reader,
    });
    expect(support.status).toBe(200);
    expectProblem(await host.create({ ...createBody, name: 'rd-1' }, reader), 403, 'forbidden');
    // The replay of alice's key by another principal is refused the same way, revealing nothing.
    const replay = await host.create(createBody, reader, createKey);
    expectProblem(replay, 403, 'forbidden');
    expect(JSON.stringify(replay.body)).not.toContain(opId);
  });

  it("HA-03 another principal's Resource and Operation read as 404 and cannot be mutated", async () => {
    for (const who of [bob, reader]) {
      const r = await host.request({ path: `/resources/${uid}`, as: who });
      expectProblem(r, 404, 'not_found');
      const o = await host.request({ path: `/operations/${opId}`, as: who });
      expectProblem(o, 404, 'not_found');
      for (const body of [r.body, o.body]) {
        expect(JSON.stringify(body)).not.toContain('auth-w1');
        expect(JSON.stringify(body)).not.toContain(uid);
      }
      // Same answer as for a uid that never existed: existence is not revealed.
      const never = await host.request({ path: '/resources/rNEVEREXISTED', as: who });
      expect(never.status).toBe(r.status);
      expect(never.body).toEqual(r.body);
      for (const method of ['PUT', 'DELETE']) {
        const res = await host.request({
          method,
          path: `/resources/${uid}`,
          body: method === 'PUT' ? { spec: {} } : undefined,
          headers: { 'idempotency-key': host.newKey(), 'takoform-expected-generation': '1' },
          as: who,
        });
        expectProblem(res, 404, 'not_found');
      }
    }
    const list = await host.request({ path: '/resources', as: bob });
    expect(list.body.items.map((r: { uid: string }) => r.uid)).not.toContain(uid);
    const still = await host.request({ path: `/resources/${uid}` });
    expect(still.body).toMatchObject({ generation: 1, phase: 'idle' });
  });

  it('HA-03 a create in a Space without write access (read-only or unknown Space) is 403', async () => {
    for (const space of ['shared', 'nowhere']) {
      const res = await host.create({ ...createBody, space, name: 'no-write' }, alice);
      expectProblem(res, 403, 'forbidden');
    }
    const bobs = await host.create({ ...createBody, space: 'other', name: 'no-write' }, alice);
    expectProblem(bobs, 403, 'forbidden');
    const list = await host.request({ path: '/resources', query: 'name=no-write' });
    expect(list.body.items).toEqual([]);
  });
});
