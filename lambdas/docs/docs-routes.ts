/**
 * The pages the discovery document links to (`/docs/host-api`, `/docs/authentication`) and the
 * origin's front page `/`, served by the Host itself with the console's strict headers. A page is
 * Markdown from `pages/` beside this module (in the API Lambda's bundle: `docs/` beside it),
 * answered as `text/markdown` to a client that asks for it and otherwise as a minimal HTML page
 * holding the text. Names are looked up in a fixed table, never joined into a file path.
 */
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { CONSOLE_SECURITY_HEADERS } from '../console/console-routes.ts';
import { HostError, problemResponse } from '../http/problem.ts';
import { type HttpRequest, type HttpResponse, headerValue } from '../http/types.ts';

export const DOCS_PATH = '/docs';

/** Served page → file and title. */
const PAGES: Record<string, { file: string; title: string }> = {
  'host-api': { file: 'host-api.md', title: 'Takoform Host API v2 on this Host' },
  authentication: { file: 'authentication.md', title: 'Authentication on this Takoform Host' },
};

const escapeHtml = (text: string) =>
  text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

function pagesDir(): string {
  for (const rel of ['./pages/', './docs/']) {
    const dir = fileURLToPath(new URL(rel, import.meta.url));
    if (existsSync(`${dir}host-api.md`)) return dir;
  }
  throw new Error('documentation pages not found');
}

/** HTML around preformatted text: readable in a browser, with no script and no inline style. */
function htmlPage(title: string, body: string): string {
  return [
    '<!doctype html>',
    '<html lang="en"><head><meta charset="utf-8">',
    `<title>${escapeHtml(title)}</title>`,
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    '</head><body><main>',
    body,
    '</main></body></html>',
    '',
  ].join('\n');
}

/** The origin's front page: where to go next. Relative links, so a stage prefix is kept. */
const HOME = htmlPage(
  'Takoform queue Host',
  [
    '<h1>Takoform queue Host</h1>',
    '<ul>',
    '<li><a href="console">Console</a> (sign in with an API key)</li>',
    '<li><a href=".well-known/takoform/v2">Discovery document</a> (Host API v2)</li>',
    '<li><a href="docs/host-api">Host API on this Host</a></li>',
    '<li><a href="docs/authentication">Authentication</a></li>',
    '<li><a href="healthz">Health</a></li>',
    '</ul>',
  ].join('\n'),
);

const wantsMarkdown = (req: HttpRequest) => /\btext\/markdown\b/i.test(headerValue(req, 'accept') ?? '');

function page(status: number, type: string, body: string): HttpResponse {
  return {
    status,
    headers: { 'content-type': type, 'cache-control': 'public, max-age=300', ...CONSOLE_SECURITY_HEADERS },
    body,
  };
}

function docsProblem(err: HostError): HttpResponse {
  const out = problemResponse(err);
  return { ...out, headers: { ...out.headers, ...CONSOLE_SECURITY_HEADERS } };
}

export function isDocsPath(path: string): boolean {
  return path === '/' || path === DOCS_PATH || path.startsWith(`${DOCS_PATH}/`);
}

/** Serves `/` and `/docs/…`; the caller routes only `isDocsPath` requests here. */
export function createDocsRoutes(): (req: HttpRequest) => HttpResponse {
  const texts = new Map<string, string>();
  return (req) => {
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      return docsProblem(new HostError('method_not_allowed', undefined, { allow: 'GET, HEAD' }));
    }
    if (req.rawQuery !== '') return docsProblem(new HostError('invalid_request', 'this page takes no query'));
    if (req.path === '/') return page(200, 'text/html; charset=utf-8', HOME);
    const name = req.path.slice(DOCS_PATH.length + 1);
    const entry = Object.hasOwn(PAGES, name) ? PAGES[name] : undefined;
    if (!entry) return docsProblem(new HostError('not_found', 'no such page; see /docs/host-api'));
    let text = texts.get(name);
    if (text === undefined) {
      text = readFileSync(`${pagesDir()}${entry.file}`, 'utf8');
      texts.set(name, text);
    }
    if (wantsMarkdown(req)) return page(200, 'text/markdown; charset=utf-8', text);
    return page(200, 'text/html; charset=utf-8', htmlPage(entry.title, `<pre>${escapeHtml(text)}</pre>`));
  };
}
