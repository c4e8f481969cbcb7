import { GetItemCommand } from '@aws-sdk/client-dynamodb';
import { marshall, unmarshall } from '@aws-sdk/util-dynamodb';
import { beforeAll, describe, expect, it } from 'vitest';
import { keys } from '../../../lambdas/adapters/aws/dynamodb-host-store.ts';
import { API_ROOT } from '../../../lambdas/http/origin.ts';
import { createTestHost, FORMS, type ParsedResponse, type TestHost } from '../../support/host-harness.ts';
import { customStack, expectProblem, ScriptedForm, UTC } from './helpers.ts';

const mw = (name: string) => ({ form: FORMS.moduleWorker, space: 'team', name, spec: {} });
const DAY_MS = 86_400_000;

/** The mutation response contract of host-api-v2 §7.4. */
function expectMutationResponse(res: ParsedResponse, origin: string): void {
  expect(res.headers['content-type']).toBe('application/json');
  expect(res.headers.location).toBe(`${origin}${API_ROOT}/operations/${res.body.id}`);
  const terminal = res.body.status === 'succeeded' || res.body.status === 'failed';
  expect(res.status).toBe(terminal ? 200 : 202);
  if (terminal) expect(res.headers['retry-after']).toBeUndefined();
  else expect(res.headers['retry-after']).toMatch(/^[1-9][0-9]*$/);
}

describe('mutation responses (HA-09), Operation invariants and retention (HA-10), headers (HA-14)', () => {
  let host: TestHost;
  beforeAll(async () => {
    host = await createTestHost({ origin: 'https://responses.example:8443' });
    host.workers.set('team', 'resp-1');
  });

  it('HA-09 202 + Retry-After + exact Location while unfinished; 200 once terminal, replay included', async () => {
    const key = host.newKey();
    const created = await host.create(mw('resp-1'), undefined, key);
    expect(created.status).toBe(202);
    expect(created.body.status).toBe('queued');
    expectMutationResponse(created, host.origin);
    expect(created.headers.location).toBe(
      `https://responses.example:8443/apis/forms.takoform.com/v2/operations/${created.body.id}`,
    );
    // Replay while unfinished: still 202 with Retry-After.
    const early = await host.create(mw('resp-1'), undefined, key);
    expect(early.status).toBe(202);
    expectMutationResponse(early, host.origin);
    await host.settle();
    const replay = await host.create(mw('resp-1'), undefined, key);
    expect(replay.status).toBe(200);
    expect(replay.body).toMatchObject({ id: created.body.id, status: 'succeeded' });
    expectMutationResponse(replay, host.origin);

    const uid = created.body.resourceUid;
    for (const [method, gen] of [
      ['PUT', '1'],
      ['DELETE', '2'],
    ] as const) {
      const headers = { 'idempotency-key': host.newKey(), 'takoform-expected-generation': gen };
      const req = {
        method,
        path: `/resources/${uid}`,
        headers,
        body: method === 'PUT' ? { spec: {} } : undefined,
      };
      const first = await host.request(req);
      expect(first.status).toBe(202);
      expectMutationResponse(first, host.origin);
      await host.settle();
      const again = await host.request(req);
      expect(again.status).toBe(200);
      expect(again.body.id).toBe(first.body.id);
      expectMutationResponse(again, host.origin);
    }
  });

  it('HA-09 mutations never answer 201 or 204', async () => {
    const created = await host.create(mw('no-201'));
    expect([200, 202]).toContain(created.status);
    await host.settle();
    const del = await host.request({
      method: 'DELETE',
      path: `/resources/${created.body.resourceUid}`,
      headers: { 'idempotency-key': host.newKey(), 'takoform-expected-generation': '1' },
    });
    expect([200, 202]).toContain(del.status);
    expect(del.body.id).toEqual(expect.any(String));
    await host.settle();
  });

  it('HA-09 refusals before acceptance are Problems, never Operations', async () => {
    const c = await host.create(mw('refusals'));
    const uid = c.body.resourceUid;
    const cases: ParsedResponse[] = [
      await host.create(mw('refusals')), // name_conflict
      await host.create({ ...mw('x'), form: 'https://forms.example.test/unknown/0.1.0' }),
      await host.create({ ...mw('x'), spec: { a: 1 } }),
      await host.request({
        method: 'PUT',
        path: `/resources/${uid}`,
        body: { spec: {} },
        headers: { 'idempotency-key': host.newKey(), 'takoform-expected-generation': '1' },
      }), // resource_busy
      await host.request({
        method: 'PUT',
        path: '/resources/rUNKNOWN',
        body: { spec: {} },
        headers: { 'idempotency-key': host.newKey(), 'takoform-expected-generation': '1' },
      }),
    ];
    const codes = cases.map((r) => r.body.code);
    expect(codes).toEqual([
      'name_conflict',
      'unsupported_form',
      'invalid_spec',
      'resource_busy',
      'not_found',
    ]);
    for (const r of cases) {
      expectProblem(r, r.status);
      expect(r.headers['retry-after']).toBeUndefined();
    }
    await host.settle();
  });

  it('HA-10 a successful Operation is succeeded/complete with no error, kept a full window after the terminal time', async () => {
    const key = host.newKey();
    const created = await host.create(mw('retain'), undefined, key);
    await host.settle();
    const op = await host.request({ path: `/operations/${created.body.id}` });
    expect(op.status).toBe(200);
    expect(op.body).toMatchObject({
      id: created.body.id,
      resourceUid: created.body.resourceUid,
      action: 'create',
      generation: 1,
      status: 'succeeded',
      effect: 'complete',
    });
    expect(op.body).not.toHaveProperty('error');
    expect(op.body).not.toHaveProperty('inputRequired');
    for (const t of ['createdAt', 'updatedAt', 'retainUntil']) expect(op.body[t]).toMatch(UTC);
    expect(Date.parse(op.body.retainUntil) - Date.parse(op.body.updatedAt)).toBeGreaterThanOrEqual(DAY_MS);
    expect(Date.parse(op.body.retainUntil) - Date.parse(op.body.createdAt)).toBeGreaterThanOrEqual(DAY_MS);
    expect(Date.parse(op.body.updatedAt)).toBeGreaterThanOrEqual(Date.parse(op.body.createdAt));
    // Accepted Operations promise the window from acceptance.
    const queued = await host.create(mw('retain-q'));
    expect(Date.parse(queued.body.retainUntil) - Date.parse(queued.body.createdAt)).toBeGreaterThanOrEqual(
      DAY_MS,
    );
    // The replay mapping is kept as long as the Operation: both items expire (TTL) at retainUntil.
    const retainSeconds = Math.ceil(Date.parse(op.body.retainUntil) / 1000);
    for (const itemKey of [keys.operation(created.body.id), keys.idempotency('alice', key)]) {
      const item = await host.dynamodb.send(
        new GetItemCommand({ TableName: host.tableName, Key: marshall(itemKey), ConsistentRead: true }),
      );
      expect(unmarshall(item.Item ?? {}).expiresAt).toBe(retainSeconds);
    }
    // Seen from a Host whose clock is 23 hours later the Operation is still readable and replays;
    // once retainUntil has passed it is no longer served.
    const mwForm = host.forms.get(FORMS.moduleWorker)!;
    const later = customStack(host, [mwForm], () => Date.parse(op.body.updatedAt) + DAY_MS - 3_600_000);
    expect((await later.request({ path: `/operations/${created.body.id}` })).status).toBe(200);
    const replayLater = await later.request({
      method: 'POST',
      path: '/resources',
      body: mw('retain'),
      headers: { 'idempotency-key': key },
    });
    expect(replayLater.status).toBe(200);
    expect(replayLater.body.id).toBe(created.body.id);
    const expired = customStack(host, [mwForm], () => Date.parse(op.body.retainUntil) + 1_000);
    expectProblem(await expired.request({ path: `/operations/${created.body.id}` }), 404, 'not_found');
    await host.settle();
  });

  it('HA-10 unfinished Operations and their keys are never discarded at the replay deadline', async () => {
    const key = host.newKey();
    const created = await host.create(mw('unfinished'), undefined, key);
    expect(created.body.status).toBe('queued');
    const item = await host.dynamodb.send(
      new GetItemCommand({
        TableName: host.tableName,
        Key: marshall(keys.operation(created.body.id)),
        ConsistentRead: true,
      }),
    );
    // No TTL while unfinished.
    expect(unmarshall(item.Item ?? {}).expiresAt).toBeUndefined();
    const mwForm = host.forms.get(FORMS.moduleWorker)!;
    const muchLater = customStack(host, [mwForm], () => Date.parse(created.body.retainUntil) + 7 * DAY_MS);
    const op = await muchLater.request({ path: `/operations/${created.body.id}` });
    expect(op.status).toBe(200);
    expect(op.body.status).toBe('queued');
    const replay = await muchLater.request({
      method: 'POST',
      path: '/resources',
      body: mw('unfinished'),
      headers: { 'idempotency-key': key },
    });
    expect(replay.status).toBe(202);
    expect(replay.body.id).toBe(created.body.id);
    await host.settle();
  });

  it('HA-10 invariants for every backend outcome: failed has error and none|partial; unknown stays reconciling', async () => {
    const h = await createTestHost();
    const form = new ScriptedForm();
    const stack = customStack(h, [form]);
    const run = () => stack.executor().runDue();
    const outcomes = {
      ok: { kind: 'complete' as const, observed: { v: 1 }, output: { o: 1 } },
      none: { kind: 'no_effect' as const, code: 'quota_exceeded', message: 'the quota is used up' },
      partial: {
        kind: 'partial' as const,
        code: 'half_done',
        message: 'half of it happened',
        observed: { v: 2 },
      },
      unknown: { kind: 'unknown' as const, code: 'timeout', message: 'no answer in time' },
      cont: { kind: 'continue' as const, delayMs: 60_000 },
    };
    // A later reconcile pass (backoff may make one due) never settles an unknown outcome either.
    form.onReconcile = async () => outcomes.unknown;
    const ops: Record<string, { id: string; uid: string }> = {};
    for (const [name, outcome] of Object.entries(outcomes)) {
      form.onExecute = async () => outcome;
      const res = await stack.request({
        method: 'POST',
        path: '/resources',
        body: { form: form.url, space: 'team', name, spec: {} },
        headers: { 'idempotency-key': h.newKey() },
      });
      expect(res.status).toBe(202);
      ops[name] = { id: res.body.id, uid: res.body.resourceUid };
      expect(await run()).toBeGreaterThanOrEqual(1);
    }
    const read = async (name: string) => {
      const o = await stack.request({ path: `/operations/${ops[name]?.id}` });
      const r = await stack.request({ path: `/resources/${ops[name]?.uid}` });
      return { op: o.body, res: r.body };
    };
    const ok = await read('ok');
    expect(ok.op).toMatchObject({ status: 'succeeded', effect: 'complete' });
    expect(ok.op).not.toHaveProperty('error');
    expect(ok.res).toMatchObject({
      phase: 'idle',
      observedGeneration: 1,
      observed: { v: 1 },
      output: { o: 1 },
    });
    expect(ok.res.observedAt).toMatch(UTC);

    const none = await read('none');
    expect(none.op).toMatchObject({
      status: 'failed',
      effect: 'none',
      error: { code: 'quota_exceeded', message: expect.any(String) },
    });
    expect(Date.parse(none.op.retainUntil) - Date.parse(none.op.updatedAt)).toBeGreaterThanOrEqual(DAY_MS);
    // A failed check must not refresh observations.
    expect(none.res).toMatchObject({ phase: 'error', observedGeneration: 0, observedAt: null, observed: {} });

    const partial = await read('partial');
    expect(partial.op).toMatchObject({ status: 'failed', effect: 'partial', error: { code: 'half_done' } });
    expect(partial.res).toMatchObject({ phase: 'error', observedAt: null });

    for (const name of ['unknown', 'cont']) {
      const { op, res } = await read(name);
      expect(op.status).toBe('reconciling');
      expect(op.effect).toBe('unknown');
      expect(res.phase).toBe('pending');
      // Never terminal, so the uid stays busy.
      const busy = await stack.request({
        method: 'PUT',
        path: `/resources/${ops[name]?.uid}`,
        body: { spec: {} },
        headers: { 'idempotency-key': h.newKey(), 'takoform-expected-generation': '1' },
      });
      expectProblem(busy, 409, 'resource_busy');
    }
    expect((await read('unknown')).op.error).toMatchObject({ code: 'timeout' });

    // Recovery of a failed Resource goes through an explicit update of the same uid.
    form.onExecute = async () => outcomes.ok;
    const fix = await stack.request({
      method: 'PUT',
      path: `/resources/${ops.none?.uid}`,
      body: { spec: {} },
      headers: { 'idempotency-key': h.newKey(), 'takoform-expected-generation': '1' },
    });
    expect(fix.status).toBe(202);
    await run();
    expect((await read('none')).res).toMatchObject({ phase: 'idle', generation: 2, observedGeneration: 2 });
    // The earlier failed Operation stays failed.
    expect((await read('none')).op).toMatchObject({ status: 'failed', effect: 'none' });
  });

  it('HA-14 every authenticated response carries Cache-Control: no-store, and every timestamp ends in Z', async () => {
    const created = await host.create(mw('hdr'));
    const uid = created.body.resourceUid;
    const responses: ParsedResponse[] = [created];
    responses.push(await host.request({ path: `/resources/${uid}` }));
    responses.push(await host.request({ path: `/operations/${created.body.id}` }));
    await host.settle();
    responses.push(await host.request({ path: `/resources/${uid}` }));
    responses.push(await host.request({ path: `/operations/${created.body.id}` }));
    responses.push(await host.request({ path: '/resources' }));
    responses.push(
      await host.request({ path: '/support', query: `form=${encodeURIComponent(FORMS.moduleWorker)}` }),
    );
    responses.push(await host.create(mw('hdr'))); // 409
    responses.push(await host.request({ path: '/resources/rNOPE' })); // 404
    responses.push(await host.request({ path: '/resources', query: 'limit=0' })); // 400
    responses.push(await host.request({ path: '/resources', as: null })); // 401
    responses.push(await host.request({ method: 'PATCH', path: '/resources' })); // 405
    const put = await host.request({
      method: 'PUT',
      path: `/resources/${uid}`,
      body: { spec: {} },
      headers: { 'idempotency-key': host.newKey(), 'takoform-expected-generation': '1' },
    });
    responses.push(put);
    await host.settle();
    responses.push(await host.request({ path: `/operations/${put.body.id}` }));
    responses.push(await host.request({ path: `/resources/${uid}` }));
    for (const r of responses) expect(r.headers['cache-control']).toBe('no-store');

    const timestamps: string[] = [];
    const collect = (v: unknown, key = ''): void => {
      if (typeof v === 'string' && /At$|Until$/.test(key)) timestamps.push(v);
      else if (v && typeof v === 'object') for (const [k, x] of Object.entries(v)) collect(x, k);
    };
    for (const r of responses) collect(r.body);
    expect(timestamps.length).toBeGreaterThanOrEqual(15);
    for (const t of timestamps) {
      expect(t).toMatch(UTC);
      expect(new Date(Date.parse(t)).toISOString()).toBe(t);
    }
  });
});
