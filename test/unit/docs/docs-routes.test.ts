/**
 * The documentation discovery links to and the origin's front page (issue 14, Deliver 6): every
 * documentation URL of the discovery document answers 200 from the Host itself, with the
 * console's strict headers; `/health` is `/healthz`; unknown pages and other methods are refused.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { CONSOLE_CSP } from '../../../lambdas/console/console-routes.ts';
import { createDocsRoutes } from '../../../lambdas/docs/docs-routes.ts';
import { discoveryDocument } from '../../../lambdas/http/discovery.ts';
import { createHttpHandler } from '../../../lambdas/http/handler.ts';
import type { HttpRequest } from '../../../lambdas/http/types.ts';

const ORIGIN = 'https://host.test';
const http = createHttpHandler({ origin: ORIGIN, docs: createDocsRoutes(), health: async () => undefined });
const get = (path: string, headers: HttpRequest['headers'] = {}, method = 'GET', rawQuery = '') =>
  http({ method, path, rawQuery, headers, body: undefined });
const page = (name: string) =>
  readFileSync(new URL(`../../../lambdas/docs/pages/${name}.md`, import.meta.url), 'utf8');

describe('documentation pages and the front page are served by the Host', () => {
  it("every documentation URL in the discovery document answers 200 with the Host's own text (HA-01)", async () => {
    const d = discoveryDocument(ORIGIN);
    const urls = [d.documentation, d.authentication.documentation];
    expect(urls).toEqual([`${ORIGIN}/docs/host-api`, `${ORIGIN}/docs/authentication`]);
    for (const url of urls) {
      const path = new URL(url).pathname;
      const r = await get(path);
      expect(r.status, path).toBe(200);
      expect(r.headers['content-type']).toBe('text/html; charset=utf-8');
      expect(r.headers['content-security-policy']).toBe(CONSOLE_CSP);
      expect(r.headers['x-content-type-options']).toBe('nosniff');
      expect(r.body).toContain('<pre>');
      expect(r.body).not.toMatch(/<script|style=/);
    }
    const auth = await get('/docs/authentication');
    expect(auth.body).toContain('Authorization: Bearer &lt;API key&gt;');
    expect(auth.body).toContain('Rotating a key keeps the principal');
  });

  it('answers the Markdown itself to a client that asks for text/markdown', async () => {
    const r = await get('/docs/host-api', { accept: ['text/markdown, text/plain;q=0.5'] });
    expect(r.status).toBe(200);
    expect(r.headers['content-type']).toBe('text/markdown; charset=utf-8');
    expect(r.body).toBe(page('host-api'));
  });

  it('/ links to the console, discovery, the docs and health; /health is /healthz', async () => {
    const home = await get('/');
    expect(home.status).toBe(200);
    for (const href of [
      'console',
      '.well-known/takoform/v2',
      'docs/host-api',
      'docs/authentication',
      'healthz',
    ])
      expect(home.body).toContain(`href="${href}"`);
    const health = await get('/health');
    expect(health.status).toBe(200);
    expect(JSON.parse(health.body)).toEqual({ status: 'ok' });
    expect((await get('/healthz')).body).toBe(health.body);
  });

  it('refuses unknown pages, traversal, queries and writes with Problems that carry the same headers', async () => {
    for (const path of [
      '/docs',
      '/docs/',
      '/docs/nope',
      '/docs/../package.json',
      '/docs/host-api.md',
      '/docs/%2e%2e',
    ]) {
      const r = await get(path);
      expect(r.status, path).toBe(404);
      expect(r.headers['content-type']).toBe('application/problem+json');
      expect(r.headers['content-security-policy']).toBe(CONSOLE_CSP);
    }
    const query = await get('/docs/host-api', {}, 'GET', 'x=1');
    expect(query.status).toBe(400);
    const post = await get('/docs/host-api', {}, 'POST');
    expect(post.status).toBe(405);
    expect(post.headers.allow).toBe('GET, HEAD');
  });
});
