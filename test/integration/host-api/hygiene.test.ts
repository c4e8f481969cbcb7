import type { APIGatewayProxyEvent } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiGatewayAdapter } from '../../../lambdas/http/api-gateway.ts';
import { type LocalHttpServer, startNodeServer } from '../../../lambdas/http/node-server.ts';
import { API_ROOT } from '../../../lambdas/http/origin.ts';
import { createTestHost, FORMS, type TestHost } from '../../support/host-harness.ts';
import { expectProblem } from './helpers.ts';

const mw = (name: string) => ({ form: FORMS.moduleWorker, space: 'team', name, spec: {} });
const MAX = 1_048_576;

describe('request hygiene (HA-13)', () => {
  let host: TestHost;
  let uid: string;
  beforeAll(async () => {
    host = await createTestHost();
    const c = await host.create(mw('hyg'));
    uid = c.body.resourceUid;
    await host.settle();
  });

  const post = (rawBody: string | Uint8Array, contentType?: string | string[]) =>
    host.request({
      method: 'POST',
      path: '/resources',
      rawBody,
      headers: {
        'idempotency-key': host.newKey(),
        ...(contentType === undefined ? {} : { 'content-type': contentType }),
      },
    });
  const count = async (name: string) =>
    (await host.request({ path: '/resources', query: `name=${name}` })).body.items.length;

  it('HA-13 a body that is not application/json is 415', async () => {
    const body = JSON.stringify(mw('ct'));
    for (const ct of [
      undefined,
      'text/plain',
      'application/x-www-form-urlencoded',
      'application/jsonx',
      'application/problem+json',
      'application/json; charset=latin1',
      'application/json; charset=utf-16',
      '',
    ]) {
      expectProblem(await post(body, ct), 415, 'unsupported_media_type');
    }
    expect(await count('ct')).toBe(0);
    const put = await host.request({
      method: 'PUT',
      path: `/resources/${uid}`,
      rawBody: '{"spec":{}}',
      headers: {
        'idempotency-key': host.newKey(),
        'takoform-expected-generation': '1',
        'content-type': 'text/json',
      },
    });
    expectProblem(put, 415, 'unsupported_media_type');
    // Parameters and case of the media type do not matter.
    const ok = await post(JSON.stringify(mw('ct')), 'Application/JSON; charset=UTF-8');
    expect(ok.status).toBe(202);
    await host.settle();
  });

  it('HA-13 duplicate JSON keys are 400, at any depth', async () => {
    const form = JSON.stringify(FORMS.moduleWorker);
    for (const raw of [
      `{"form":${form},"form":${form},"space":"team","name":"dup","spec":{}}`,
      `{"form":${form},"space":"team","name":"dup","name":"dup","spec":{}}`,
      `{"form":${form},"space":"team","name":"dup","spec":{"a":1,"a":1}}`,
      `{"form":${form},"space":"team","name":"dup","spec":{},"spec":{}}`,
      `{"form":${form},"space":"team","name":"dup","spec":{"\\u0061":1,"a":2}}`,
    ]) {
      expectProblem(await post(raw, 'application/json'), 400, 'invalid_request');
    }
    expect(await count('dup')).toBe(0);
  });

  it('HA-13 lossy numbers are 400 while an exact value of the same shape reaches validation (422)', async () => {
    const form = JSON.stringify(FORMS.moduleWorker);
    const withN = (n: string) => `{"form":${form},"space":"team","name":"num","spec":{"n":${n}}}`;
    for (const n of [
      '9007199254740993',
      '0.10000000000000001',
      '1e400',
      '-1e400',
      '123456789012345678901234567890',
    ]) {
      const res = await post(withN(n), 'application/json');
      expectProblem(res, 400, 'invalid_request');
    }
    for (const n of ['9007199254740991', '0.1', '-0.125', '1.0e0']) {
      // Parsed fine; refused only because ModuleWorker's spec must be {}.
      expectProblem(await post(withN(n), 'application/json'), 422, 'invalid_spec');
    }
    for (const raw of ['NaN', 'Infinity', '01', '.5', '1.', '+1']) {
      expectProblem(await post(withN(raw), 'application/json'), 400, 'invalid_request');
    }
  });

  it('HA-13 other malformed JSON is 400: invalid UTF-8, BOM, lone surrogate, trailing data, not an object', async () => {
    const valid = new TextEncoder().encode(JSON.stringify(mw('bad-json')));
    const invalidUtf8 = new Uint8Array([...valid.slice(0, 10), 0xff, ...valid.slice(10)]);
    const bom = new Uint8Array([0xef, 0xbb, 0xbf, ...valid]);
    const form = JSON.stringify(FORMS.moduleWorker);
    for (const raw of [
      invalidUtf8,
      bom,
      `{"form":${form},"space":"team","name":"\\ud800","spec":{}}`,
      `${JSON.stringify(mw('bad-json'))} {}`,
      '[]',
      '"text"',
      'null',
      '',
      '{',
    ]) {
      expectProblem(await post(raw, 'application/json'), 400, 'invalid_request');
    }
    expect(await count('bad-json')).toBe(0);
  });

  it('HA-13 unknown, missing or malformed envelope fields are 400; unoffered optional fields are 422 capability_required', async () => {
    for (const body of [
      { ...mw('env'), metadata: {} },
      { ...mw('env'), apiVersion: 'v1' },
      { ...mw('env'), spec: undefined },
      { form: FORMS.moduleWorker, space: 'team', spec: {} },
      { ...mw('env'), name: 'bad name' },
      { ...mw('env'), space: '-bad' },
      { ...mw('env'), form: 7 },
    ]) {
      const res = await host.request({
        method: 'POST',
        path: '/resources',
        body,
        headers: { 'idempotency-key': host.newKey() },
      });
      expectProblem(res, 400, 'invalid_request');
    }
    // A present `spec` of the wrong JSON type is the Form's to judge (host-profile §4): 422.
    for (const spec of [[], null, 'x', 1]) {
      const res = await host.request({
        method: 'POST',
        path: '/resources',
        body: { ...mw('env'), spec },
        headers: { 'idempotency-key': host.newKey() },
      });
      expectProblem(res, 422, 'invalid_spec');
    }
    for (const extra of [{ privateInputs: {} }, { offering: { id: 'a', revision: 'b' } }]) {
      const res = await host.request({
        method: 'POST',
        path: '/resources',
        body: { ...mw('env'), ...extra },
        headers: { 'idempotency-key': host.newKey() },
      });
      expectProblem(res, 422, 'capability_required');
    }
    const put = await host.request({
      method: 'PUT',
      path: `/resources/${uid}`,
      body: { spec: {}, name: 'renamed' },
      headers: { 'idempotency-key': host.newKey(), 'takoform-expected-generation': '1' },
    });
    expectProblem(put, 400, 'invalid_request');
    expect(await count('env')).toBe(0);
    expect((await host.request({ path: `/resources/${uid}` })).body.generation).toBe(1);
  });

  it('HA-13 unknown or repeated query parameters are 400 on every endpoint', async () => {
    const enc = encodeURIComponent(FORMS.moduleWorker);
    const cases = [
      { method: 'POST', path: '/resources', query: 'dryRun=1', body: mw('q') },
      { method: 'POST', path: '/resources', query: 'space=team', body: mw('q') },
      { method: 'GET', path: '/resources', query: 'foo=bar' },
      { method: 'GET', path: '/resources', query: 'space=team&space=team' },
      { method: 'GET', path: `/resources/${uid}`, query: 'x' },
      { method: 'GET', path: '/operations/op1', query: 'x=1' },
      { method: 'GET', path: '/support', query: `form=${enc}&form=${enc}` },
      { method: 'GET', path: '/support', query: `form=${enc}&verbose=1` },
      {
        method: 'PUT',
        path: `/resources/${uid}`,
        query: 'force=true',
        body: { spec: {} },
        headers: { 'takoform-expected-generation': '1' },
      },
      {
        method: 'DELETE',
        path: `/resources/${uid}`,
        query: 'cascade=true',
        headers: { 'takoform-expected-generation': '1' },
      },
    ];
    for (const c of cases) {
      const res = await host.request({
        ...c,
        headers: { 'idempotency-key': host.newKey(), ...(c.headers ?? {}) },
      });
      expectProblem(res, 400, 'invalid_request');
    }
    expect(await count('q')).toBe(0);
    expect((await host.request({ path: `/resources/${uid}` })).body.generation).toBe(1);
  });

  it('HA-13 a DELETE with a body is 400 and deletes nothing', async () => {
    for (const [rawBody, ct] of [
      ['{}', 'application/json'],
      ['x', undefined],
      [' ', 'text/plain'],
    ] as const) {
      const res = await host.request({
        method: 'DELETE',
        path: `/resources/${uid}`,
        rawBody,
        headers: {
          'idempotency-key': host.newKey(),
          'takoform-expected-generation': '1',
          ...(ct ? { 'content-type': ct } : {}),
        },
      });
      expectProblem(res, 400, 'invalid_request');
    }
    expect((await host.request({ path: `/resources/${uid}` })).body).toMatchObject({
      generation: 1,
      phase: 'idle',
    });
    // GETs take no body either.
    expectProblem(
      await host.request({
        path: `/resources/${uid}`,
        rawBody: '{}',
        headers: { 'content-type': 'application/json' },
      }),
      400,
      'invalid_request',
    );
  });

  it('HA-13 a wrong method is 405 with Allow', async () => {
    const cases: [string, string, string][] = [
      ['PATCH', '/resources', 'GET, POST'],
      ['DELETE', '/resources', 'GET, POST'],
      ['PUT', '/resources', 'GET, POST'],
      ['POST', `/resources/${uid}`, 'GET, PUT, DELETE'],
      ['PATCH', `/resources/${uid}`, 'GET, PUT, DELETE'],
      ['POST', '/operations/op1', 'GET'],
      ['DELETE', '/operations/op1', 'GET'],
      ['PUT', '/support', 'GET'],
    ];
    for (const [method, path, allow] of cases) {
      const res = await host.request({ method, path });
      expectProblem(res, 405, 'method_not_allowed');
      expect(res.headers.allow).toBe(allow);
    }
  });

  it('HA-13 unknown paths under the API root are 404 not_found', async () => {
    for (const path of [
      '',
      '/',
      '/resource',
      '/resources/',
      `/resources/${uid}/x`,
      '/operations',
      '/v1/resources',
    ]) {
      expectProblem(await host.request({ path }), 404, 'not_found');
    }
    expectProblem(await host.request({ path: '/resources/not%20an%20id' }), 404, 'not_found');
    expectProblem(await host.request({ path: '/resources/%E0%A4%A' }), 404, 'not_found');
  });

  /** A create body of exactly `size` bytes: a valid request padded with JSON whitespace. */
  const padded = (name: string, size: number) => {
    const core = JSON.stringify(mw(name));
    return `${core.slice(0, -1)}${' '.repeat(size - core.length)}}`;
  };

  it('HA-13 the HTTP core behind API Gateway refuses a body past maxRequestBytes with 413 (no socket limit there)', async () => {
    const adapter = apiGatewayAdapter(host.http);
    const event = (body: string, name: string) =>
      ({
        httpMethod: 'POST',
        path: `${API_ROOT}/resources`,
        headers: {},
        multiValueHeaders: {
          Authorization: [`Bearer ${host.principals.alice?.token}`],
          'Content-Type': ['application/json'],
          'Idempotency-Key': [`${name}-${host.newKey()}`],
        },
        multiValueQueryStringParameters: null,
        body: Buffer.from(body).toString('base64'),
        isBase64Encoded: true,
      }) as unknown as APIGatewayProxyEvent;
    const over = await adapter(event(padded('gw-over', MAX + 1), 'gw-over'));
    expect(over.statusCode).toBe(413);
    expect(over.headers?.['content-type']).toBe('application/problem+json');
    expect(JSON.parse(over.body)).toMatchObject({
      type: 'about:blank',
      status: 413,
      code: 'request_too_large',
    });
    expect(await count('gw-over')).toBe(0);
    // The same through the in-process core, for PUT as well.
    const put = await host.request({
      method: 'PUT',
      path: `/resources/${uid}`,
      rawBody: `{"spec":{}${' '.repeat(MAX)}}`,
      headers: {
        'idempotency-key': host.newKey(),
        'takoform-expected-generation': '1',
        'content-type': 'application/json',
      },
    });
    expectProblem(put, 413, 'request_too_large');
    // Exactly the limit is fine.
    const exact = await adapter(event(padded('gw-exact', MAX), 'gw-exact'));
    expect(exact.statusCode).toBe(202);
    await host.settle();
  });

  describe('over a real socket (node-server)', () => {
    let server: LocalHttpServer;
    let base: string;
    beforeAll(async () => {
      server = await startNodeServer(host.http, 0);
      base = `http://127.0.0.1:${server.port}${API_ROOT}`;
    });
    afterAll(async () => {
      await server.close();
    });

    const postRaw = (body: string | ReadableStream<Uint8Array>, extra: Record<string, string> = {}) =>
      fetch(`${base}/resources`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${host.principals.alice?.token}`,
          'content-type': 'application/json',
          'idempotency-key': host.newKey(),
          ...extra,
        },
        body,
        redirect: 'manual',
        ...(body instanceof ReadableStream ? { duplex: 'half' } : {}),
      } as RequestInit);

    it('HA-13 a body of maxRequestBytes is accepted; one byte more is 413 request_too_large', async () => {
      const exact = padded('size-exact', MAX);
      expect(Buffer.byteLength(exact)).toBe(MAX);
      const ok = await postRaw(exact);
      expect(ok.status).toBe(202);
      await ok.arrayBuffer();

      const over = padded('size-over', MAX + 1);
      expect(Buffer.byteLength(over)).toBe(MAX + 1);
      const res = await postRaw(over);
      expect(res.status).toBe(413);
      expect(res.headers.get('content-type')).toBe('application/problem+json');
      expect(res.headers.get('cache-control')).toBe('no-store');
      const body = (await res.json()) as { type: string; status: number; code: string; title: unknown };
      expect(body).toMatchObject({ type: 'about:blank', status: 413, code: 'request_too_large' });
      expect(typeof body.title).toBe('string');
      expect(await count('size-over')).toBe(0);
      await host.settle();
    });

    it('HA-13 a streamed (chunked) body past the limit is 413 too', async () => {
      const chunk = new Uint8Array(64 * 1024).fill(0x20);
      let sent = 0;
      const stream = new ReadableStream<Uint8Array>({
        pull(controller) {
          if (sent > MAX + chunk.length) {
            controller.close();
            return;
          }
          sent += chunk.length;
          controller.enqueue(chunk);
        },
      });
      const res = await postRaw(stream).catch((err: unknown) => err);
      // The server may close the connection once it has answered; the answer must be 413.
      expect(res).toBeInstanceOf(Response);
      expect((res as Response).status).toBe(413);
      expect(await (res as Response).json()).toMatchObject({ code: 'request_too_large', status: 413 });
    });

    it('HA-13 over the socket: 415 and 405 with Allow behave as in-process', async () => {
      const wrongType = await postRaw(JSON.stringify(mw('sock')), { 'content-type': 'text/plain' });
      expect(wrongType.status).toBe(415);
      expect(wrongType.headers.get('content-type')).toBe('application/problem+json');
      await wrongType.arrayBuffer();
      const patch = await fetch(`${base}/resources`, {
        method: 'PATCH',
        headers: { authorization: `Bearer ${host.principals.alice?.token}` },
      });
      expect(patch.status).toBe(405);
      expect(patch.headers.get('allow')).toBe('GET, POST');
      await patch.arrayBuffer();
      const dup = await fetch(`${base}/resources?limit=1&limit=1`, {
        headers: { authorization: `Bearer ${host.principals.alice?.token}` },
      });
      expect(dup.status).toBe(400);
      await dup.arrayBuffer();
    });
  });
});
