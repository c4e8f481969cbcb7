import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { PROBLEM_STATUS } from '../../../lambdas/http/problem.ts';
import { withFaults } from '../../../lambdas/local/faults/sdk-faults.ts';
import { createTestHost, FORMS, type ParsedResponse, type TestHost } from '../../support/host-harness.ts';
import { customStack, expectProblem, ScriptedForm } from './helpers.ts';

const mw = (name: string) => ({ form: FORMS.moduleWorker, space: 'team', name, spec: {} });
const MARKER = 'SECRET-MARKER-7f3a9c';

/** Collects everything written to stderr (where the Host logs) while `run` executes. */
async function captureLogs<T>(run: () => Promise<T>): Promise<{ value: T; logs: string }> {
  const chunks: string[] = [];
  const spy = vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => {
    chunks.push(typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8'));
    return true;
  });
  try {
    return { value: await run(), logs: chunks.join('') };
  } finally {
    spy.mockRestore();
  }
}

describe('Problem Details (HA-12)', () => {
  let host: TestHost;
  beforeAll(async () => {
    host = await createTestHost();
  });
  afterEach(() => {
    vi.restoreAllMocks();
  });

  it('HA-12 every refusal is application/problem+json with about:blank, a title, status = HTTP status and a code', async () => {
    const created = await host.create(mw('p-1'));
    const uid = created.body.resourceUid;
    const cases: [ParsedResponse, number, string][] = [
      [await host.request({ path: '/resources', query: 'x=1' }), 400, 'invalid_request'],
      [await host.request({ path: '/resources', as: null }), 401, 'unauthenticated'],
      [await host.create(mw('p-2'), host.principals.reader), 403, 'forbidden'],
      [await host.request({ path: '/resources/rMISSING' }), 404, 'not_found'],
      [await host.request({ path: '/offerings' }), 404, 'capability_unavailable'],
      [await host.request({ method: 'PATCH', path: `/resources/${uid}` }), 405, 'method_not_allowed'],
      [await host.create(mw('p-1')), 409, 'name_conflict'],
      [
        await host.request({
          method: 'PUT',
          path: `/resources/${uid}`,
          body: { spec: {} },
          headers: { 'idempotency-key': host.newKey(), 'takoform-expected-generation': '1' },
        }),
        409,
        'resource_busy',
      ],
      [
        await host.request({
          method: 'POST',
          path: '/resources',
          rawBody: '{}',
          headers: { 'idempotency-key': host.newKey(), 'content-type': 'text/plain' },
        }),
        415,
        'unsupported_media_type',
      ],
      [await host.create({ ...mw('p-3'), form: 'https://x.example/f/1/' }), 422, 'unsupported_form'],
      [await host.create({ ...mw('p-3'), spec: { a: 1 } }), 422, 'invalid_spec'],
      [
        await host.request({
          method: 'POST',
          path: '/resources',
          body: { ...mw('p-3'), privateInputs: {} },
          headers: { 'idempotency-key': host.newKey() },
        }),
        422,
        'capability_required',
      ],
      [
        await host.request({
          method: 'DELETE',
          path: `/resources/${uid}`,
          headers: { 'idempotency-key': host.newKey() },
        }),
        428,
        'expected_generation_required',
      ],
    ];
    await host.settle();
    const del = await host.request({
      method: 'DELETE',
      path: `/resources/${uid}`,
      headers: { 'idempotency-key': host.newKey(), 'takoform-expected-generation': '1' },
    });
    expect(del.status).toBe(202);
    await host.settle();
    cases.push([await host.request({ path: `/resources/${uid}` }), 410, 'gone']);
    for (const [res, status, code] of cases) {
      expectProblem(res, status, code);
      expect(PROBLEM_STATUS[code as keyof typeof PROBLEM_STATUS]).toBe(status);
      expect(res.headers['cache-control']).toBe('no-store');
      // Only the RFC 9457 members this Host uses.
      for (const k of Object.keys(res.body)) {
        expect(['type', 'title', 'status', 'code', 'detail', 'operationId']).toContain(k);
      }
      if (res.body.detail !== undefined) expect(typeof res.body.detail).toBe('string');
    }
  });

  it('HA-12 an unexpected store failure is 500 internal_error without the exception text, in the response or the logs', async () => {
    const created = await host.create(mw('fault'));
    const uid = created.body.resourceUid;
    const original = host.store.getResource.bind(host.store);
    host.store.getResource = async () => {
      throw new Error(`connection to db failed: ${MARKER} password=${MARKER}`);
    };
    try {
      const { value: responses, logs } = await captureLogs(async () => [
        await host.request({ path: `/resources/${uid}` }),
        await host.request({
          method: 'PUT',
          path: `/resources/${uid}`,
          body: { spec: {} },
          headers: { 'idempotency-key': host.newKey(), 'takoform-expected-generation': '1' },
        }),
      ]);
      for (const res of responses) {
        expectProblem(res, 500, 'internal_error');
        expect(res.body.title).toBe('Internal Server Error');
        expect(JSON.stringify(res.body)).not.toContain(MARKER);
        expect(JSON.stringify(res.body)).not.toMatch(/Error:|\bat .+:\d+:\d+|connection to db/);
        expect(JSON.stringify(res.headers)).not.toContain(MARKER);
      }
      // The failure is logged (so operators see it), but without its message.
      expect(logs).toContain('unexpected error');
      expect(logs).not.toContain(MARKER);
    } finally {
      host.store.getResource = original;
    }
    expect((await host.request({ path: `/resources/${uid}` })).status).toBe(200);
    await host.settle();
  });

  it('HA-12 a store that is unreachable is 503 temporarily_unavailable with Retry-After and no exception text', async () => {
    const created = await host.create(mw('unreachable'));
    const uid = created.body.resourceUid;
    const original = host.store.getResource.bind(host.store);
    host.store.getResource = async () => {
      const err = new Error(`connect ECONNREFUSED ${MARKER}`);
      (err as Error & { code?: string }).code = 'ECONNREFUSED';
      throw err;
    };
    try {
      const { value: res, logs } = await captureLogs(() => host.request({ path: `/resources/${uid}` }));
      expectProblem(res, 503, 'temporarily_unavailable');
      expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
      expect(JSON.stringify(res.body)).not.toContain(MARKER);
      expect(logs).not.toContain(MARKER);
    } finally {
      host.store.getResource = original;
    }
    await host.settle();
  });

  it('HA-12 RC-04 an acceptance transaction DynamoDB throttles is 503 temporarily_unavailable, and nothing was accepted', async () => {
    // DynamoDB cancels a throttled transaction (reason ThrottlingError); DynamoDB Local never does.
    const throttled = await createTestHost();
    withFaults(throttled.dynamodb, 'dynamodb', {
      config: { seed: 3, dynamodb: { operations: { TransactWriteItems: { transactionThrottle: 1 } } } },
      label: 'problems',
    });
    const res = await throttled.create(mw('throttled'));
    expectProblem(res, 503, 'temporarily_unavailable');
    expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
    const list = await throttled.request({ path: '/resources', query: 'space=team&name=throttled' });
    expect(list.body.items).toEqual([]);
  });

  it('HA-12 a failing transaction during acceptance is 500 internal_error with no exception text', async () => {
    const original = host.store.acceptCreate.bind(host.store);
    host.store.acceptCreate = async () => {
      throw new TypeError(`Cannot read properties of undefined (reading '${MARKER}')`);
    };
    try {
      const { value: res, logs } = await captureLogs(() => host.create(mw('fault-accept')));
      expectProblem(res, 500, 'internal_error');
      expect(JSON.stringify(res.body)).not.toContain(MARKER);
      expect(logs).not.toContain(MARKER);
    } finally {
      host.store.acceptCreate = original;
    }
  });

  it('HA-12 a backend exception never reaches the Operation error or the logs', async () => {
    const h = await createTestHost();
    const form = new ScriptedForm();
    const stack = customStack(h, [form]);
    form.onExecute = async () => {
      throw new Error(`backend said ${MARKER} at /srv/secret/path.js:10:5`);
    };
    const created = await stack.request({
      method: 'POST',
      path: '/resources',
      body: { form: form.url, space: 'team', name: 'thrower', spec: {} },
      headers: { 'idempotency-key': h.newKey() },
    });
    const { logs } = await captureLogs(() => stack.executor().runDue());
    const op = await stack.request({ path: `/operations/${created.body.id}` });
    expect(op.body).toMatchObject({ status: 'reconciling', effect: 'unknown' });
    expect(op.body.error).toMatchObject({ code: expect.any(String), message: expect.any(String) });
    expect(JSON.stringify(op.body)).not.toContain(MARKER);
    expect(JSON.stringify(op.body)).not.toContain('/srv/secret');
    expect(logs).not.toContain(MARKER);
  });

  it("HA-12 refusals carry no other principal's data and no request secrets", async () => {
    const created = await host.create(mw('private-name-xyz'));
    const bobRead = await host.request({
      path: `/resources/${created.body.resourceUid}`,
      as: host.principals.bob,
    });
    expectProblem(bobRead, 404, 'not_found');
    expect(JSON.stringify(bobRead)).not.toContain('private-name-xyz');
    expect(JSON.stringify(bobRead)).not.toContain('alice');
    // A bad credential is never echoed.
    const bad = await host.request({
      path: '/resources',
      as: null,
      headers: { authorization: `Bearer ${MARKER}-token-0000000000000000000` },
    });
    expectProblem(bad, 401, 'unauthenticated');
    expect(JSON.stringify(bad)).not.toContain(MARKER);
    // Body bytes are never echoed in a JSON syntax error.
    const junk = await host.request({
      method: 'POST',
      path: '/resources',
      rawBody: `{"form": "${MARKER}", "space": "team", "name": "x", "spec": {}, }`,
      headers: { 'idempotency-key': host.newKey(), 'content-type': 'application/json' },
    });
    expectProblem(junk, 400, 'invalid_request');
    expect(JSON.stringify(junk.body)).not.toContain(MARKER);
    await host.settle();
  });
});
