import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { API_ROOT } from '../../../lambdas/http/origin.ts';
import { createTestHost, FORMS, type TestHost } from '../../support/host-harness.ts';
import { expectProblem } from './helpers.ts';

describe('discovery and Form support', () => {
  let host: TestHost;
  beforeAll(async () => {
    host = await createTestHost({ origin: 'https://host.test' });
  });
  afterEach(() => {
    vi.restoreAllMocks();
  });

  it('HA-01 serves the discovery document without credentials', async () => {
    for (const as of [null, host.principals.alice]) {
      const res = await host.request({ path: '/.well-known/takoform/v2', as });
      expect(res.status).toBe(200);
      expect(res.headers['content-type']).toBe('application/json');
      expect(res.body).toEqual({
        api: 'forms.takoform.com/v2',
        baseUrl: `https://host.test${API_ROOT}`,
        documentation: expect.any(String),
        authentication: { schemes: ['Bearer'], documentation: expect.any(String) },
        capabilities: { offerings: false, previews: false, privateInputs: false },
        limits: { maxRequestBytes: 1_048_576, maxPageSize: 100, replayWindowSeconds: 86_400 },
      });
    }
  });

  it('HA-01 advertises a same-origin HTTPS baseUrl with no trailing slash, query, fragment or userinfo', async () => {
    const { body } = await host.request({ path: '/.well-known/takoform/v2', as: null });
    const base = new URL(body.baseUrl);
    expect(base.protocol).toBe('https:');
    expect(base.origin).toBe('https://host.test');
    expect(body.baseUrl).not.toMatch(/\/$/);
    expect(body.baseUrl).toMatch(/^[\x21-\x7e]+$/);
    expect(body.baseUrl).not.toMatch(/[?#\\@]/);
    expect(base.href).toBe(body.baseUrl);
    for (const doc of [body.documentation, body.authentication.documentation]) {
      expect(new URL(doc).protocol).toBe('https:');
    }
    for (const v of Object.values(body.limits))
      expect(Number.isSafeInteger(v) && (v as number) > 0).toBe(true);
    // Connection metadata only: nothing but the six documented fields.
    expect(Object.keys(body).sort()).toEqual(
      ['api', 'authentication', 'baseUrl', 'capabilities', 'documentation', 'limits'].sort(),
    );
  });

  it('HA-01 answers 200 with garbage credentials, 405 to other methods and 400 to a query', async () => {
    const garbage = await host.request({
      path: '/.well-known/takoform/v2',
      as: null,
      headers: { authorization: 'Bearer nonsense' },
    });
    expect(garbage.status).toBe(200);
    const post = await host.request({ method: 'POST', path: '/.well-known/takoform/v2', as: null });
    expectProblem(post, 405, 'method_not_allowed');
    expect(post.headers.allow).toBe('GET');
    expectProblem(
      await host.request({ path: '/.well-known/takoform/v2', query: 'x=1', as: null }),
      400,
      'invalid_request',
    );
  });

  it('HA-02 declares each of the three served Forms supported with all four operations', async () => {
    expect(Object.values(FORMS)).toHaveLength(3);
    for (const form of Object.values(FORMS)) {
      const res = await host.request({ path: '/support', query: `form=${encodeURIComponent(form)}` });
      expect(res.status).toBe(200);
      expect(res.headers['content-type']).toBe('application/json');
      expect(res.body).toEqual({
        form,
        supported: true,
        operations: ['create', 'read', 'update', 'delete'],
        privateInputs: false,
      });
    }
  });

  it('HA-02 answers supported:false for unknown and near-miss Form URLs, compared as exact strings', async () => {
    const nearMisses = [
      'https://forms.example.test/unknown/0.1.0',
      'not a url',
      'https://edge.forms.takoform.com/forms/ModuleWorker/0.2.0/',
      'https://edge.forms.takoform.com/forms/QueueConsumer/0.3.1/',
      ...Object.values(FORMS).flatMap((f) => [
        f.slice(0, -1), // no trailing slash
        `${f}/`,
        f.replace('https:', 'http:'),
        f.replace('/forms/', '/Forms/'),
        f.replace('edge.forms', 'EDGE.forms'),
        `${f}?x=1`,
        `${f}#v`,
        ` ${f}`,
      ]),
    ];
    for (const form of nearMisses) {
      const res = await host.request({ path: '/support', query: `form=${encodeURIComponent(form)}` });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ form, supported: false, operations: [], privateInputs: false });
    }
  });

  it('HA-02 never fetches a Form URL (support and create of unknown Forms)', async () => {
    const fetchSpy = vi.spyOn(globalThis, 'fetch');
    const unknown = 'https://forms.example.test/unknown/0.1.0';
    await host.request({ path: '/support', query: `form=${encodeURIComponent(unknown)}` });
    await host.request({ path: '/support', query: `form=${encodeURIComponent(FORMS.moduleWorker)}` });
    for (const form of [unknown, FORMS.moduleWorker.slice(0, -1), FORMS.queue.replace('https:', 'http:')]) {
      const created = await host.create({ form, space: 'team', name: 'never-fetched', spec: {} });
      expectProblem(created, 422, 'unsupported_form');
    }
    expect((await host.request({ path: '/resources', query: 'name=never-fetched' })).body.items).toEqual([]);
    expect(fetchSpy).not.toHaveBeenCalled();
  });

  it('HA-02 refuses a missing, empty or repeated form parameter and unknown parameters with 400', async () => {
    const enc = encodeURIComponent(FORMS.moduleWorker);
    for (const query of ['', 'form=', `form=${enc}&form=${enc}`, `form=${enc}&x=1`, 'other=1']) {
      expectProblem(await host.request({ path: '/support', query }), 400, 'invalid_request');
    }
    const post = await host.request({ method: 'POST', path: '/support', query: `form=${enc}` });
    expectProblem(post, 405, 'method_not_allowed');
    expect(post.headers.allow).toBe('GET');
  });

  it('HA-02 support needs authentication like every non-discovery route', async () => {
    const res = await host.request({
      path: '/support',
      query: `form=${encodeURIComponent(FORMS.moduleWorker)}`,
      as: null,
    });
    expectProblem(res, 401, 'unauthenticated');
  });

  it('HA-01 optional routes answer 404 capability_unavailable for every method, after authentication', async () => {
    for (const path of ['/offerings', '/previews', '/operations/op1/private-inputs']) {
      for (const method of ['GET', 'POST', 'PUT']) {
        expectProblem(await host.request({ method, path }), 404, 'capability_unavailable');
      }
      expectProblem(await host.request({ path, as: null }), 401, 'unauthenticated');
    }
  });
});
