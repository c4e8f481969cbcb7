import { readFileSync } from 'node:fs';
import type { APIGatewayProxyEvent } from 'aws-lambda';
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { CONSOLE_CSP, isConsolePath } from '../../../lambdas/console/console-routes.ts';
import { isDocsPath } from '../../../lambdas/docs/docs-routes.ts';
import { apiGatewayAdapter } from '../../../lambdas/http/api-gateway.ts';
import { API_ROOT } from '../../../lambdas/http/origin.ts';
import type { HttpRequest, HttpResponse } from '../../../lambdas/http/types.ts';
import { createTestHost, FORMS, type TestHost } from '../../support/host-harness.ts';

/** ~200 runs per property keeps the file fast; raise FUZZ_RUNS for a deeper local search. */
const RUNS = Number(process.env.FUZZ_RUNS ?? 200);
const ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

const CONSOLE_FILES = ['index.html', 'app.js', 'console.css'].map((f) =>
  readFileSync(new URL(`../../../lambdas/console/assets/${f}`, import.meta.url), 'utf8'),
);

/** What every answer under /console must satisfy: its own files or a Problem, always with the CSP. */
function checkConsoleResponse(out: HttpResponse): void {
  expect(out.status).toBeLessThan(500);
  expect(out.headers['content-security-policy']).toBe(CONSOLE_CSP);
  if (out.status === 200) {
    // Exactly one of the console's own files, nothing else.
    expect(out.headers['content-type']).toMatch(/^text\/(html|javascript|css); charset=utf-8$/);
    expect(CONSOLE_FILES).toContain(out.body);
    return;
  }
  expect(out.body).not.toMatch(/Error:|\n\s+at |\bat [^\s]+ \(|node:internal|ENOENT|\/work\/|\/var\/task/);
  if (out.status >= 400) {
    expect(out.headers['content-type']).toBe('application/problem+json');
    expect(Object.keys(JSON.parse(out.body)).sort()).toEqual(['code', 'status', 'title', 'type']);
  } else {
    expect([304, 308]).toContain(out.status);
    expect(out.body).toBe('');
  }
}

/** What every answer of `/` and `/docs/…` must satisfy: a page of the Host's or a Problem, with the CSP. */
function checkDocsResponse(out: HttpResponse): void {
  expect(out.status).toBeLessThan(500);
  expect(out.headers['content-security-policy']).toBe(CONSOLE_CSP);
  expect(out.body).not.toMatch(/Error:|\n\s+at |\bat [^\s]+ \(|node:internal|ENOENT|\/work\/|\/var\/task/);
  if (out.status === 200) {
    expect(out.headers['content-type']).toMatch(/^text\/(html|markdown); charset=utf-8$/);
    expect(out.body).not.toMatch(/<script|style=/);
    return;
  }
  expect(out.headers['content-type']).toBe('application/problem+json');
  for (const k of Object.keys(JSON.parse(out.body)))
    expect(['type', 'title', 'status', 'code', 'detail']).toContain(k);
}

/** What every answer must satisfy (SEC-03, HA-12, HA-14). */
function checkResponse(out: HttpResponse): void {
  expect(out.status).toBeGreaterThanOrEqual(200);
  expect(out.status).toBeLessThan(500);
  expect(out.headers['cache-control']).toBe('no-store');
  // Stack frames, exception class prefixes, file paths: none may appear in any answer.
  expect(out.body).not.toMatch(/Error:|\n\s+at |\bat [^\s]+ \(|\.ts:\d+|\.js:\d+|node:internal|ZodError/);
  if (out.status >= 400) {
    expect(out.headers['content-type']).toBe('application/problem+json');
    const p = JSON.parse(out.body);
    expect(p.type).toBe('about:blank');
    expect(typeof p.title).toBe('string');
    expect(p.status).toBe(out.status);
    expect(p.code).toMatch(/^[a-z][a-z0-9_]{0,63}$/);
    for (const k of Object.keys(p))
      expect(['type', 'title', 'status', 'code', 'detail', 'operationId']).toContain(k);
  } else {
    expect(out.headers['content-type']).toBe('application/json');
    JSON.parse(out.body);
  }
}

describe('fuzzed requests never cause a 5xx or leak internals (SEC-03, HA-12)', () => {
  let host: TestHost;
  let uids: string[];
  let opIds: string[];

  beforeAll(async () => {
    host = await createTestHost();
    const made = await Promise.all(
      ['fz-a', 'fz-b', 'fz-c'].map((name) =>
        host.create({ form: FORMS.moduleWorker, space: 'team', name, spec: {} }),
      ),
    );
    uids = made.map((m) => m.body.resourceUid);
    opIds = made.map((m) => m.body.id);
    await host.settle();
  });

  const call = async (req: HttpRequest) => {
    const out = await host.http(req);
    checkResponse(out);
    return out;
  };

  const token = () =>
    fc.constantFrom<string | undefined>(
      undefined,
      host.principals.alice?.token,
      host.principals.bob?.token,
      host.principals.reader?.token,
      'garbage-token-0000000000000000000000000',
    );

  const idLike = () =>
    fc.oneof(
      fc.constantFrom(...uids, ...opIds, 'rNOPE', 'op1'),
      fc.stringMatching(ID).filter((s) => s.length <= 128),
      fc.string({ maxLength: 40 }),
      fc.constantFrom('%', '%zz', '%2F', '..', '.', '%00', 'a%20b', '\u0000', '😀', 'x'.repeat(300)),
    );

  const path = () =>
    fc.oneof(
      fc.constantFrom('', '/', '/resources', '/support', '/offerings', '/previews', '/operations'),
      idLike().map((id) => `/resources/${id}`),
      idLike().map((id) => `/operations/${id}`),
      idLike().map((id) => `/operations/${id}/private-inputs`),
      fc.array(idLike(), { maxLength: 4 }).map((segs) => `/${segs.join('/')}`),
    );

  const queryPart = () =>
    fc.oneof(
      fc
        .tuple(
          fc.constantFrom('space', 'name', 'form', 'limit', 'cursor', 'x', 'Limit', ''),
          fc.oneof(
            fc.constantFrom(
              'team',
              'other',
              '1',
              '0',
              '100',
              '101',
              '01',
              '-1',
              encodeURIComponent(FORMS.moduleWorker),
            ),
            fc.string({ maxLength: 30 }).map(encodeURIComponent),
            fc.string({ maxLength: 30 }),
          ),
        )
        .map(([k, v]) => `${k}=${v}`),
      fc.string({ maxLength: 20 }),
    );
  const query = () =>
    fc.oneof(
      fc.constant(''),
      fc.array(queryPart(), { maxLength: 4 }).map((p) => p.join('&')),
    );

  const headerVariant = (values: fc.Arbitrary<string>) =>
    fc.oneof(
      fc.constant(undefined),
      values,
      fc.tuple(values, values).map(([a, b]) => [a, b]),
    );
  const idempotencyKey = () =>
    headerVariant(
      fc.oneof(
        fc.uuid(),
        fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9._:-]{15,127}$/),
        fc.string({ maxLength: 140 }),
      ),
    );
  const generation = () =>
    headerVariant(
      fc.oneof(
        fc.constantFrom(
          '0',
          '1',
          '2',
          '3',
          '01',
          '-1',
          '1.0',
          '9007199254740991',
          '9007199254740992',
          ' 1',
          '',
        ),
        fc.nat().map(String),
        fc.string({ maxLength: 20 }),
      ),
    );
  const contentType = () =>
    headerVariant(
      fc.oneof(
        fc.constantFrom(
          'application/json',
          'application/json; charset=utf-8',
          'APPLICATION/JSON',
          'text/plain',
          'application/json; charset=latin1',
          'application/json;',
          ';',
          '',
        ),
        fc.string({ maxLength: 40 }),
      ),
    );

  const envelope = () =>
    fc
      .record(
        {
          form: fc.oneof(
            { arbitrary: fc.constant(FORMS.moduleWorker), weight: 6 },
            { arbitrary: fc.string({ maxLength: 60 }), weight: 1 },
            { arbitrary: fc.jsonValue(), weight: 1 },
          ),
          space: fc.oneof(
            { arbitrary: fc.constant('team'), weight: 6 },
            { arbitrary: fc.constantFrom('other', 'shared', 'nowhere'), weight: 2 },
            { arbitrary: fc.string({ maxLength: 10 }), weight: 1 },
            { arbitrary: fc.jsonValue(), weight: 1 },
          ),
          name: fc.oneof(
            { arbitrary: fc.stringMatching(ID).filter((s) => s.length <= 128), weight: 6 },
            { arbitrary: fc.string({ maxLength: 10 }), weight: 1 },
            { arbitrary: fc.jsonValue(), weight: 1 },
          ),
          spec: fc.oneof(
            { arbitrary: fc.constant({}), weight: 4 },
            { arbitrary: fc.jsonValue(), weight: 1 },
            { arbitrary: fc.dictionary(fc.string({ maxLength: 5 }), fc.jsonValue()), weight: 2 },
          ),
          privateInputs: fc.dictionary(fc.string({ maxLength: 5 }), fc.string({ maxLength: 5 })),
          offering: fc.jsonValue(),
          extra: fc.jsonValue(),
        },
        { requiredKeys: ['form', 'space', 'name', 'spec'] },
      )
      .chain((e) =>
        // Mostly drop the optional and unknown members so that many bodies reach validation.
        fc
          .subarray(Object.keys(e))
          .map((keep) =>
            Object.fromEntries(
              Object.entries(e).filter(
                ([k]) =>
                  ['form', 'space', 'name', 'spec'].includes(k) || (keep.includes(k) && keep.length < 3),
              ),
            ),
          ),
      );

  const body = () =>
    fc.oneof(
      fc.constant(undefined),
      fc.uint8Array({ maxLength: 200 }),
      fc.json({ maxDepth: 4 }).map((s) => new TextEncoder().encode(s)),
      envelope().map((e) => new TextEncoder().encode(JSON.stringify(e))),
      envelope().map((e) => new TextEncoder().encode(JSON.stringify(e))),
      fc
        .record({ spec: fc.oneof(fc.constant({}), fc.jsonValue()) }, { requiredKeys: [] })
        .map((e) => new TextEncoder().encode(JSON.stringify(e))),
      fc.stringMatching(/^[[\]{}",:0-9eE.+\-a-z \\u]{0,80}$/).map((s) => new TextEncoder().encode(s)),
    );

  const method = () =>
    fc.oneof(
      fc.constantFrom('GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'HEAD', 'OPTIONS', 'TRACE'),
      fc.constantFrom('get', 'Post', 'FOO', ''),
    );

  const request = () =>
    fc.record({
      method: method(),
      path: path(),
      query: query(),
      auth: fc.oneof(
        { arbitrary: token().map((t) => (t === undefined ? undefined : `Bearer ${t}`)), weight: 6 },
        { arbitrary: fc.string({ maxLength: 30 }), weight: 1 },
        { arbitrary: fc.constantFrom('Basic YWxpY2U6cGFzcw==', 'Bearer', 'Bearer  x'), weight: 1 },
      ),
      key: idempotencyKey(),
      generation: generation(),
      contentType: contentType(),
      body: body(),
    });

  type FuzzRequest = ReturnType<typeof request> extends fc.Arbitrary<infer T> ? T : never;
  const build = (r: FuzzRequest): HttpRequest => {
    const headers: Record<string, string | string[]> = {};
    if (r.auth !== undefined) headers.authorization = r.auth;
    if (r.key !== undefined) headers['idempotency-key'] = r.key;
    if (r.generation !== undefined) headers['takoform-expected-generation'] = r.generation;
    if (r.contentType !== undefined) headers['content-type'] = r.contentType;
    return { method: r.method, path: `${API_ROOT}${r.path}`, rawQuery: r.query, headers, body: r.body };
  };

  it('SEC-03 HA-12 random methods, paths, headers, queries and bodies under the API root', async () => {
    await fc.assert(
      fc.asyncProperty(request(), async (r) => {
        await call(build(r));
      }),
      { numRuns: RUNS },
    );
  });

  it('SEC-03 HA-12 authenticated mutations with valid headers and random bodies', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom('POST', 'PUT', 'DELETE'),
        fc.constantFrom(...uids),
        fc.constantFrom('1', '2', '0'),
        body(),
        async (m, uid, gen, b) => {
          await call({
            method: m,
            path: m === 'POST' ? `${API_ROOT}/resources` : `${API_ROOT}/resources/${uid}`,
            rawQuery: '',
            headers: {
              authorization: `Bearer ${host.principals.alice?.token}`,
              'idempotency-key': `fz-${crypto.randomUUID()}`,
              'takoform-expected-generation': gen,
              'content-type': 'application/json',
            },
            body: b,
          });
        },
      ),
      { numRuns: RUNS },
    );
    await host.settle();
  });

  it('SEC-03 HA-12 authenticated list queries with random parameters', async () => {
    await fc.assert(
      fc.asyncProperty(query(), async (q) => {
        await call({
          method: 'GET',
          path: `${API_ROOT}/resources`,
          rawQuery: q,
          headers: { authorization: `Bearer ${host.principals.alice?.token}` },
          body: undefined,
        });
      }),
      { numRuns: RUNS },
    );
  });

  it('SEC-03 HA-12 the same random requests through the API Gateway adapter', async () => {
    const adapter = apiGatewayAdapter(host.http);
    await fc.assert(
      fc.asyncProperty(request(), fc.boolean(), async (r, base64) => {
        const req = build(r);
        const multiValueHeaders: Record<string, string[]> = {};
        for (const [k, v] of Object.entries(req.headers)) {
          if (v !== undefined) multiValueHeaders[k] = typeof v === 'string' ? [v] : [...v];
        }
        // What API Gateway hands over: decoded names and values, grouped by name.
        const grouped = new Map<string, string[]>();
        for (const part of r.query.split('&').filter(Boolean)) {
          const [k = '', v = ''] = part.split('=');
          grouped.set(k, [...(grouped.get(k) ?? []), v]);
        }
        const multiValueQueryStringParameters = Object.fromEntries(grouped);
        const bytes = req.body === undefined ? null : Buffer.from(req.body);
        const event = {
          httpMethod: r.method,
          path: req.path,
          headers: {},
          multiValueHeaders,
          multiValueQueryStringParameters,
          body: bytes === null ? null : base64 ? bytes.toString('base64') : bytes.toString('utf8'),
          isBase64Encoded: base64,
        } as unknown as APIGatewayProxyEvent;
        const out = await adapter(event);
        checkResponse({
          status: out.statusCode,
          headers: (out.headers ?? {}) as Record<string, string>,
          body: out.body,
        });
      }),
      { numRuns: RUNS },
    );
  });

  it('SEC-03 HA-12 random requests to the /ext/queues/v1 producer and operator endpoints and /healthz', async () => {
    const queue = await host.create({
      form: FORMS.queue,
      space: 'team',
      name: 'fz-q',
      spec: { messageRetentionSeconds: 600 },
    });
    await host.settle();
    const q = queue.body.resourceUid as string;
    // Weighted towards requests that pass authentication and name the live queue, so that most
    // runs reach the operator's own validation and SQS calls.
    const target = () =>
      fc.oneof(
        { arbitrary: fc.constant(q), weight: 8 },
        { arbitrary: fc.constantFrom(...uids), weight: 1 },
        idLike(),
      );
    const routes: [string, (id: string) => string][] = [
      ['GET', (id) => `/ext/queues/v1/queues/${id}/stats`],
      ['GET', (id) => `/ext/queues/v1/queues/${id}/history`],
      ['POST', (id) => `/ext/queues/v1/queues/${id}/peek`],
      ['POST', (id) => `/ext/queues/v1/queues/${id}/redrive`],
      ['POST', (id) => `/ext/queues/v1/queues/${id}/purge`],
      ['POST', (id) => `/ext/queues/v1/queues/${id}/messages`],
      ['GET', (id) => `/ext/queues/v1/consumers/${id}/state`],
      ['GET', () => '/ext/queues/v1/me'],
      ['GET', () => '/healthz'],
    ];
    // Mostly a route with its own method; sometimes another method or a path no route has.
    const extRequest = () =>
      fc.oneof(
        {
          weight: 4,
          arbitrary: fc
            .tuple(
              fc.constantFrom(...routes),
              target(),
              fc.oneof({ arbitrary: fc.constant(undefined), weight: 4 }, method()),
            )
            .map(([[m, at], id, other]) => ({ method: other ?? m, path: at(id) })),
        },
        {
          weight: 1,
          arbitrary: fc
            .tuple(method(), fc.oneof(idLike(), fc.constantFrom('/ext/queues/v1', '/ext/x')))
            .map(([m, p]) => ({
              method: m,
              path: p.startsWith('/ext') ? p : `/ext/queues/v1/${p}`,
            })),
        },
      );
    const extBody = () =>
      fc.oneof(
        { arbitrary: fc.constant(undefined), weight: 2 },
        { arbitrary: body(), weight: 1 },
        {
          weight: 3,
          arbitrary: fc
            .record(
              {
                limit: fc.oneof(fc.integer({ min: -2, max: 120 }), fc.jsonValue()),
                to: fc.oneof(target(), fc.jsonValue()),
                messages: fc.oneof(
                  fc.array(
                    fc.record({ body: fc.base64String({ maxLength: 40 }), delaySeconds: fc.integer() }),
                    {
                      maxLength: 3,
                    },
                  ),
                  fc.jsonValue(),
                ),
                extra: fc.jsonValue(),
              },
              { requiredKeys: [] },
            )
            .map((e) => new TextEncoder().encode(JSON.stringify(e))),
        },
      );
    await fc.assert(
      fc.asyncProperty(
        extRequest(),
        fc.oneof({ arbitrary: fc.constant(''), weight: 4 }, { arbitrary: query(), weight: 1 }),
        fc.oneof({ arbitrary: fc.constant(host.principals.alice?.token), weight: 4 }, token()),
        fc.oneof({ arbitrary: fc.constant('application/json'), weight: 4 }, contentType()),
        extBody(),
        async ({ method: m, path }, q, t, type, b) => {
          const headers: Record<string, string | string[]> = {};
          if (t !== undefined) headers.authorization = `Bearer ${t}`;
          if (type !== undefined) headers['content-type'] = type;
          await call({ method: m, path, rawQuery: q, headers, body: b });
        },
      ),
      // Peeks and redrives of an empty queue wait out a 1 s long poll: fewer runs here.
      { numRuns: Math.max(25, Math.floor(RUNS / 2)) },
    );
  });

  it('SEC-03 random paths outside the API root and on discovery are never 5xx', async () => {
    await fc.assert(
      fc.asyncProperty(method(), fc.string({ maxLength: 60 }), query(), async (m, p, q) => {
        for (const path of [`/${p}`, '/.well-known/takoform/v2']) {
          const out = await host.http({ method: m, path, rawQuery: q, headers: {}, body: undefined });
          if (isConsolePath(path)) checkConsoleResponse(out);
          else if (isDocsPath(path)) checkDocsResponse(out);
          else checkResponse(out);
        }
      }),
      { numRuns: RUNS },
    );
  });

  it('SEC-03 random requests to /, /health and the documentation pages: no 5xx, no exception text, the CSP', async () => {
    const docsPath = () =>
      fc.oneof(
        fc.constantFrom('/', '/docs', '/docs/', '/docs/host-api', '/docs/authentication', '/health'),
        fc
          .array(
            fc.oneof(
              fc.constantFrom('host-api', 'authentication', '..', '%2e%2e', '__proto__', ''),
              idLike(),
            ),
            {
              minLength: 1,
              maxLength: 3,
            },
          )
          .map((segs) => `/docs/${segs.join('/')}`),
      );
    await fc.assert(
      fc.asyncProperty(
        docsPath(),
        fc.oneof({ arbitrary: fc.constantFrom('GET', 'HEAD'), weight: 3 }, method()),
        query(),
        fc.option(fc.constantFrom('text/markdown', 'text/html', '*/*', 'text/markdown;q=0')),
        async (path, m, q, accept) => {
          const headers: Record<string, string> = accept === null ? {} : { accept };
          const out = await host.http({ method: m, path, rawQuery: q, headers, body: undefined });
          if (path === '/health') checkResponse(out);
          else checkDocsResponse(out);
        },
      ),
      { numRuns: RUNS },
    );
  });

  it('SEC-03 random requests to /console and its files: no 5xx, no exception text, always the CSP', async () => {
    const segment = () =>
      fc.oneof(
        fc.constantFrom(
          '',
          'app.js',
          'console.css',
          'index.html',
          '..',
          '.',
          '%2e%2e',
          '%2F',
          '%00',
          'assets',
        ),
        fc.constantFrom('../package.json', '..%2f..%2fpackage.json', 'app.js/', 'app.js?x', '__proto__'),
        idLike(),
      );
    const consolePath = () =>
      fc.oneof(
        fc.constantFrom('/console', '/console/'),
        fc.array(segment(), { minLength: 1, maxLength: 4 }).map((segs) => `/console/${segs.join('/')}`),
      );
    await fc.assert(
      fc.asyncProperty(
        consolePath(),
        fc.oneof({ arbitrary: fc.constantFrom('GET', 'HEAD'), weight: 3 }, method()),
        query(),
        token(),
        fc.option(fc.oneof(fc.string({ maxLength: 40 }), fc.constant('"x"'))),
        body(),
        async (path, m, q, t, etag, b) => {
          const headers: Record<string, string> = {};
          if (t !== undefined) headers.authorization = `Bearer ${t}`;
          if (etag !== null) headers['if-none-match'] = etag;
          checkConsoleResponse(await host.http({ method: m, path, rawQuery: q, headers, body: b }));
        },
      ),
      { numRuns: RUNS },
    );
  });
});
