/**
 * `/console` as the HTTP core serves it (issue 14, part 3): the page and its two files with a
 * strict Content-Security-Policy, sane caching, and nothing else — unknown names, traversal
 * attempts and other methods are refused without touching the file system.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { CONSOLE_CSP, createConsoleRoutes } from '../../../lambdas/console/console-routes.ts';
import { createHttpHandler } from '../../../lambdas/http/handler.ts';
import type { HttpRequest } from '../../../lambdas/http/types.ts';

const http = createHttpHandler({ origin: 'https://host.test', console: createConsoleRoutes() });
const get = (path: string, headers: HttpRequest['headers'] = {}, method = 'GET') =>
  http({ method, path, rawQuery: '', headers, body: undefined });
const asset = (name: string) =>
  readFileSync(new URL(`../../../lambdas/console/assets/${name}`, import.meta.url), 'utf8');

describe('the console is served by the Host with a strict CSP', () => {
  it('serves the page at /console and its script and style beside it', async () => {
    const page = await get('/console');
    expect(page.status).toBe(200);
    expect(page.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(page.body).toBe(asset('index.html'));
    expect(page.headers['cache-control']).toBe('no-cache');
    const js = await get('/console/app.js');
    expect(js.headers['content-type']).toBe('text/javascript; charset=utf-8');
    expect(js.body).toBe(asset('app.js'));
    const css = await get('/console/console.css');
    expect(css.headers['content-type']).toBe('text/css; charset=utf-8');
    expect(css.headers['cache-control']).toBe('public, max-age=300');
    for (const r of [page, js, css]) {
      expect(r.headers['content-security-policy']).toBe(CONSOLE_CSP);
      expect(r.headers['x-content-type-options']).toBe('nosniff');
    }
    expect(CONSOLE_CSP).toContain(
      "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:",
    );
    expect(CONSOLE_CSP).toContain("frame-ancestors 'none'");
  });

  it('has no inline script, style or event handler, and names no other origin', () => {
    const html = asset('index.html');
    for (const tag of html.match(/<script\b[^>]*>/g) ?? []) expect(tag).toMatch(/\ssrc="console\/app\.js"/);
    expect(html).not.toMatch(/<script\b[^>]*>[^<]+<\/script>/);
    expect(html).not.toMatch(/<style\b|\sstyle=|\son[a-z]+=/i);
    for (const file of ['index.html', 'app.js', 'console.css']) {
      // The only absolute URL allowed is the SVG namespace, which is a name, not a request.
      const urls = asset(file).match(/https?:\/\/[^\s'"`)]+/g) ?? [];
      expect(urls.filter((u) => u !== 'http://www.w3.org/2000/svg')).toEqual([]);
    }
    expect(asset('app.js')).not.toMatch(/innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(/);
  });

  it('answers 304 to a matching If-None-Match, and HEAD like GET', async () => {
    const first = await get('/console/app.js');
    const again = await get('/console/app.js', { 'if-none-match': first.headers.etag });
    expect(again.status).toBe(304);
    expect(again.body).toBe('');
    expect((await get('/console/app.js', { 'if-none-match': '"other"' })).status).toBe(200);
    expect((await get('/console', {}, 'HEAD')).status).toBe(200);
  });

  it('redirects /console/ to the page, relative so that a stage prefix survives', async () => {
    const r = await get('/console/');
    expect(r.status).toBe(308);
    expect(r.headers.location).toBe('../console');
    expect(new URL(r.headers.location ?? '', 'https://h.test/prod/console/').pathname).toBe('/prod/console');
  });

  it('SEC-03 refuses unknown names, traversal and other methods with a Problem that carries the CSP', async () => {
    for (const path of [
      '/console/index.html',
      '/console/../package.json',
      '/console/%2e%2e/package.json',
      '/console/..%2fpackage.json',
      '/console/app.js/',
      '/console/assets/app.js',
      '/console//app.js',
      '/console/APP.JS',
      '/console/constructor',
      '/console/__proto__',
      '/console/app.js%00',
    ]) {
      const r = await get(path);
      expect(r.status, path).toBe(404);
      expect(r.headers['content-type']).toBe('application/problem+json');
      expect(r.headers['content-security-policy']).toBe(CONSOLE_CSP);
    }
    const post = await get('/console', {}, 'POST');
    expect(post.status).toBe(405);
    expect(post.headers.allow).toBe('GET, HEAD');
    // A path that only starts like /console is not the console.
    expect((await get('/consoles')).status).toBe(404);
    expect((await get('/consoles')).headers['content-security-policy']).toBeUndefined();
  });
});
