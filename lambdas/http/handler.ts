import { isConsolePath } from '../console/console-routes.ts';
import { isDocsPath } from '../docs/docs-routes.ts';
import { discoveryDocument } from './discovery.ts';
import { DISCOVERY_PATH } from './origin.ts';
import { HostError, internalErrorResponse, problemResponse } from './problem.ts';
import type { HttpRequest, HttpResponse } from './types.ts';

export interface HttpCoreOptions {
  /** The public origin advertised in discovery, `baseUrl` and `Location`. */
  readonly origin: string;
  /** Routes under the API root; the Host API engine plugs in here. */
  readonly api?: (req: HttpRequest) => Promise<HttpResponse>;
  /** `/console` and its files (no credentials: the page signs in by itself). */
  readonly console?: (req: HttpRequest) => HttpResponse;
  /** `/` and the documentation pages discovery links to (`/docs/…`), no credentials. */
  readonly docs?: (req: HttpRequest) => HttpResponse;
  /** Routes under `/ext/`: this Host's non-portable extensions (host-profile §3). */
  readonly extensions?: (req: HttpRequest) => Promise<HttpResponse>;
  /**
   * `GET /healthz` (no credentials): resolves when the Host can serve, i.e. its table answers.
   * Without one, `/healthz` answers 200 whenever the process does.
   */
  readonly health?: () => Promise<void>;
  /** Receives unexpected errors for logging; never their text in a response. */
  readonly onError?: (err: unknown, req: HttpRequest) => void;
}

const TRANSIENT_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'EAI_AGAIN',
  'ENOTFOUND',
]);
const TRANSIENT_NAMES = new Set([
  'TimeoutError',
  'ThrottlingException',
  'ProvisionedThroughputExceededException',
  'RequestLimitExceeded',
  'InternalServerError',
  'ServiceUnavailable',
  'TransactionConflictException',
]);

/** Store and network failures a retry may outlive (the SDK has already retried them). */
export function isTransientBackendError(err: unknown): boolean {
  const e = err as { name?: string; code?: string; $metadata?: { httpStatusCode?: number } };
  return (
    TRANSIENT_CODES.has(e?.code ?? '') ||
    TRANSIENT_NAMES.has(e?.name ?? '') ||
    (e?.$metadata?.httpStatusCode ?? 0) >= 500
  );
}

/** Liveness and readiness of the Host, for load balancers, supervisors and `takoform status`. */
export const HEALTH_PATH = '/healthz';
/** The same check under the name many tools try first. */
const HEALTH_ALIAS = '/health';

async function health(req: HttpRequest, check: (() => Promise<void>) | undefined): Promise<HttpResponse> {
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    throw new HostError('method_not_allowed', undefined, { allow: 'GET' });
  }
  if (req.rawQuery !== '') throw new HostError('invalid_request', 'the health check takes no query');
  try {
    await check?.();
  } catch {
    return problemResponse(new HostError('temporarily_unavailable', 'the Host table does not answer'));
  }
  return json(200, { status: 'ok' });
}

export type HttpHandler = (req: HttpRequest) => Promise<HttpResponse>;

export function json(status: number, value: unknown, headers: Record<string, string> = {}): HttpResponse {
  return {
    status,
    headers: { 'content-type': 'application/json', 'cache-control': 'no-store', ...headers },
    body: JSON.stringify(value),
  };
}

/** The one HTTP core behind both the local server and the API Gateway Lambda. */
export function createHttpHandler(opts: HttpCoreOptions): HttpHandler {
  return async (req) => {
    try {
      if (req.path === DISCOVERY_PATH) {
        if (req.method !== 'GET' && req.method !== 'HEAD') {
          throw new HostError('method_not_allowed', undefined, { allow: 'GET' });
        }
        if (req.rawQuery !== '') throw new HostError('invalid_request', 'discovery takes no query');
        return json(200, discoveryDocument(opts.origin));
      }
      if (req.path === HEALTH_PATH || req.path === HEALTH_ALIAS) return await health(req, opts.health);
      if (opts.console && isConsolePath(req.path)) return opts.console(req);
      if (opts.docs && isDocsPath(req.path)) return opts.docs(req);
      if (opts.extensions && req.path.startsWith('/ext/')) return await opts.extensions(req);
      if (opts.api) return await opts.api(req);
      throw new HostError('not_found');
    } catch (err) {
      if (err instanceof HostError) return problemResponse(err);
      opts.onError?.(err, req);
      if (isTransientBackendError(err)) {
        // Nothing is known to have been accepted: the client keeps its key and retries later.
        return problemResponse(
          new HostError(
            'temporarily_unavailable',
            'a backing store is unavailable; retry with the same key',
            {
              'retry-after': '2',
            },
          ),
        );
      }
      return internalErrorResponse();
    }
  };
}
