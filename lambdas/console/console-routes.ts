/**
 * `{origin}/console`: the operator console, static files served by the Host itself (locally and
 * behind API Gateway, through the same HTTP core). The page holds no data; its script calls the
 * Host API and `/ext/queues/v1` with the key the user signs in with.
 *
 * Only the files named in `ASSETS` are served, read once from the assets folder: a request path
 * is looked up in that table, never joined into a file path, so no traversal is possible.
 */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { HostError, problemResponse } from '../http/problem.ts';
import { type HttpRequest, type HttpResponse, headerValue } from '../http/types.ts';

export const CONSOLE_PATH = '/console';

/** Served name → file and media type. The page is `/console`; the rest sit under it. */
const ASSETS: Record<string, { file: string; type: string }> = {
  '': { file: 'index.html', type: 'text/html; charset=utf-8' },
  'app.js': { file: 'app.js', type: 'text/javascript; charset=utf-8' },
  'console.css': { file: 'console.css', type: 'text/css; charset=utf-8' },
};

/** No asset may be larger: they are read into memory and sent in one Lambda response. */
const MAX_ASSET_BYTES = 256 * 1024;

/** Nothing but the Host's own files: no inline code, no other origin, no framing. */
export const CONSOLE_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; " +
  "base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/** The console's headers; the Host's documentation pages send the same. */
export const CONSOLE_SECURITY_HEADERS = {
  'content-security-policy': CONSOLE_CSP,
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-origin',
};

interface Asset {
  body: string;
  type: string;
  etag: string;
}

/**
 * The folder beside this module in the source tree; in the API Lambda's bundle (one file at the
 * root) the build copies it to `console/` next to the bundle.
 */
function assetsDir(): string {
  for (const rel of ['./assets/', './console/']) {
    const dir = fileURLToPath(new URL(rel, import.meta.url));
    if (existsSync(`${dir}index.html`)) return dir;
  }
  throw new Error('console assets not found');
}

function loadAssets(): Map<string, Asset> {
  const dir = assetsDir();
  const out = new Map<string, Asset>();
  for (const [name, { file, type }] of Object.entries(ASSETS)) {
    const bytes = readFileSync(`${dir}${file}`);
    if (bytes.length > MAX_ASSET_BYTES)
      throw new Error(`console asset ${file} is over ${MAX_ASSET_BYTES} bytes`);
    const etag = `"${createHash('sha256').update(bytes).digest('base64url').slice(0, 22)}"`;
    out.set(name, { body: bytes.toString('utf8'), type, etag });
  }
  return out;
}

/** A Problem with the console's headers, so that even an error page runs no foreign code. */
function consoleProblem(err: HostError): HttpResponse {
  const out = problemResponse(err);
  return { ...out, headers: { ...out.headers, ...CONSOLE_SECURITY_HEADERS } };
}

export function isConsolePath(path: string): boolean {
  return path === CONSOLE_PATH || path.startsWith(`${CONSOLE_PATH}/`);
}

/** Serves `/console` and its files; the caller routes only `isConsolePath` requests here. */
export function createConsoleRoutes(): (req: HttpRequest) => HttpResponse {
  let assets: Map<string, Asset> | undefined;
  return (req) => {
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      return consoleProblem(new HostError('method_not_allowed', undefined, { allow: 'GET, HEAD' }));
    }
    if (req.path === `${CONSOLE_PATH}/`) {
      // Relative, so that it also holds under a stage prefix (`/prod/console/`).
      return {
        status: 308,
        headers: { location: '../console', 'cache-control': 'no-store', ...CONSOLE_SECURITY_HEADERS },
        body: '',
      };
    }
    const name = req.path === CONSOLE_PATH ? '' : req.path.slice(CONSOLE_PATH.length + 1);
    if (!Object.hasOwn(ASSETS, name)) return consoleProblem(new HostError('not_found'));
    assets ??= loadAssets();
    const asset = assets.get(name);
    if (!asset) return consoleProblem(new HostError('not_found'));
    const headers: Record<string, string> = {
      'content-type': asset.type,
      // The page is revalidated on every load, so a new Host version shows at once; the files it
      // names may be reused for a few minutes and are revalidated by their ETag after that.
      'cache-control': name === '' ? 'no-cache' : 'public, max-age=300',
      etag: asset.etag,
      ...CONSOLE_SECURITY_HEADERS,
    };
    const ifNoneMatch = headerValue(req, 'if-none-match');
    if (ifNoneMatch?.split(',').some((t) => t.trim() === asset.etag)) {
      return { status: 304, headers, body: '' };
    }
    return { status: 200, headers, body: asset.body };
  };
}
