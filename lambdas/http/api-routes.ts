import { z } from 'zod';
import type { Authenticator, Principal } from '../engine/auth.ts';
import { fingerprint } from '../engine/canonical-json.ts';
import type { FormRegistry } from '../engine/forms.ts';
import type { HostEngine } from '../engine/host-engine.ts';
import { ID_PATTERN } from '../engine/ids.ts';
import { type OperationRecord, publicOperation, publicResource, TERMINAL } from '../engine/model.ts';
import { LIMITS } from './discovery.ts';
import { json } from './handler.ts';
import { API_ROOT } from './origin.ts';
import { HostError } from './problem.ts';
import {
  expectedGeneration,
  idempotencyKey,
  idSegment,
  isPlainObject,
  jsonBody,
  parseQuery,
  requireNoBody,
  requireNoQuery,
} from './request-parsing.ts';
import { type HttpRequest, type HttpResponse, headerValue } from './types.ts';

export interface ApiRoutesOptions {
  origin: () => string;
  engine: HostEngine;
  forms: FormRegistry;
  authenticator: Authenticator;
}

/**
 * `spec` must be present; its JSON type is the Form's to judge, so `null`, arrays and scalars are
 * `422 invalid_spec` from the Form's validator (host-profile §4), not an envelope error.
 */
const specField = z.unknown().refine((v) => v !== undefined, 'spec is required');
const createEnvelope = z.strictObject({
  form: z.string().min(1).max(2048),
  space: z.string().regex(ID_PATTERN),
  name: z.string().regex(ID_PATTERN),
  spec: specField,
});
const updateEnvelope = z.strictObject({ spec: specField });

const OPTIONAL_ROUTES = [/^\/offerings$/, /^\/previews$/, /^\/operations\/[^/]+\/private-inputs$/];

function methodNotAllowed(allow: string): never {
  throw new HostError('method_not_allowed', undefined, { allow });
}

/** Optional Host API fields this Host does not offer (capabilities all false). */
function refuseUnofferedFields(body: Record<string, unknown>): void {
  if ('privateInputs' in body || 'offering' in body) {
    throw new HostError('capability_required', 'this Host offers neither privateInputs nor offerings');
  }
}

function envelope<T>(schema: z.ZodType<T>, body: unknown): T {
  const parsed = schema.safeParse(body);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue?.path.length ? issue.path.join('.') : 'body';
    throw new HostError('invalid_request', `the request envelope is invalid at ${where}`);
  }
  return parsed.data;
}

export async function authenticate(req: HttpRequest, authenticator: Authenticator): Promise<Principal> {
  const header = headerValue(req, 'authorization');
  const match = header === undefined ? null : /^Bearer ([\x21-\x7e]{1,512})$/.exec(header);
  const principal = match?.[1] ? await authenticator.authenticate(match[1]) : undefined;
  if (!principal) {
    throw new HostError('unauthenticated', 'send a valid API key as a Bearer token', {
      'www-authenticate': 'Bearer realm="takoform"',
    });
  }
  return principal;
}

/** Routes under the API root (host-api-v2 §4). */
export function createApiRoutes(opts: ApiRoutesOptions) {
  const { engine, forms } = opts;
  const base = () => `${opts.origin()}${API_ROOT}`;

  const operationResponse = (op: OperationRecord): HttpResponse => {
    const terminal = TERMINAL.has(op.status);
    const headers: Record<string, string> = { location: `${base()}/operations/${op.id}` };
    if (!terminal) headers['retry-after'] = '1';
    return json(terminal ? 200 : 202, publicOperation(op), headers);
  };

  const support = (req: HttpRequest): HttpResponse => {
    if (req.method !== 'GET') methodNotAllowed('GET');
    requireNoBody(req);
    const { form } = parseQuery(req.rawQuery, ['form']);
    if (form === undefined || form === '')
      throw new HostError('invalid_request', 'the form parameter is required');
    const supported = forms.has(form);
    return json(200, {
      form,
      supported,
      operations: supported ? ['create', 'read', 'update', 'delete'] : [],
      privateInputs: false,
    });
  };

  const resources = async (req: HttpRequest, p: Principal): Promise<HttpResponse> => {
    if (req.method === 'GET') {
      requireNoBody(req);
      const q = parseQuery(req.rawQuery, ['space', 'name', 'form', 'limit', 'cursor']);
      let limit: number = LIMITS.maxPageSize;
      if (q.limit !== undefined) {
        if (!/^[1-9][0-9]{0,2}$/.test(q.limit) || Number(q.limit) > LIMITS.maxPageSize) {
          throw new HostError('invalid_request', `limit must be an integer in 1..${LIMITS.maxPageSize}`);
        }
        limit = Number(q.limit);
      }
      for (const f of ['space', 'name'] as const) {
        if (q[f] !== undefined && !ID_PATTERN.test(q[f]))
          throw new HostError('invalid_request', `${f} is not a valid identifier`);
      }
      const page = await engine.list(p, {
        space: q.space,
        name: q.name,
        form: q.form,
        limit,
        cursor: q.cursor,
      });
      return json(200, { items: page.items.map(publicResource), nextCursor: page.nextCursor });
    }
    if (req.method !== 'POST') methodNotAllowed('GET, POST');
    requireNoQuery(req);
    const key = idempotencyKey(req);
    const body = jsonBody(req);
    if (!isPlainObject(body)) throw new HostError('invalid_request', 'the body must be a JSON object');
    refuseUnofferedFields(body);
    const input = envelope(createEnvelope, body);
    const fp = fingerprint({ method: 'POST', path: '/resources', query: {}, body });
    return operationResponse(await engine.create(p, key, input, fp));
  };

  const resource = async (req: HttpRequest, p: Principal, rawUid: string): Promise<HttpResponse> => {
    const uid = idSegment(rawUid);
    if (req.method === 'GET') {
      requireNoQuery(req);
      requireNoBody(req);
      return json(200, publicResource(await engine.getResource(p, uid)));
    }
    if (req.method !== 'PUT' && req.method !== 'DELETE') methodNotAllowed('GET, PUT, DELETE');
    requireNoQuery(req);
    const key = idempotencyKey(req);
    const generation = expectedGeneration(req);
    const path = `/resources/${uid}`;
    if (req.method === 'DELETE') {
      requireNoBody(req);
      const fp = fingerprint({ method: 'DELETE', path, query: {}, expectedGeneration: generation });
      return operationResponse(await engine.delete(p, uid, key, generation, fp));
    }
    const body = jsonBody(req);
    if (!isPlainObject(body)) throw new HostError('invalid_request', 'the body must be a JSON object');
    refuseUnofferedFields(body);
    const input = envelope(updateEnvelope, body);
    const fp = fingerprint({ method: 'PUT', path, query: {}, expectedGeneration: generation, body });
    return operationResponse(await engine.update(p, uid, key, generation, input.spec, fp));
  };

  const operation = async (req: HttpRequest, p: Principal, rawId: string): Promise<HttpResponse> => {
    const id = idSegment(rawId);
    if (req.method !== 'GET') methodNotAllowed('GET');
    requireNoQuery(req);
    requireNoBody(req);
    return json(200, publicOperation(await engine.getOperation(p, id)));
  };

  return async (req: HttpRequest): Promise<HttpResponse> => {
    if (req.path !== API_ROOT && !req.path.startsWith(`${API_ROOT}/`)) throw new HostError('not_found');
    const principal = await authenticate(req, opts.authenticator);
    const path = req.path.slice(API_ROOT.length);
    if (OPTIONAL_ROUTES.some((r) => r.test(path))) {
      throw new HostError('capability_unavailable', 'this Host does not offer that optional feature');
    }
    if (path === '/support') return support(req);
    if (path === '/resources') return resources(req, principal);
    let m = /^\/resources\/([^/]+)$/.exec(path);
    if (m?.[1]) return resource(req, principal, m[1]);
    m = /^\/operations\/([^/]+)$/.exec(path);
    if (m?.[1]) return operation(req, principal, m[1]);
    throw new HostError('not_found');
  };
}
