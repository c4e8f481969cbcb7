import { ID_PATTERN, IDEMPOTENCY_KEY_PATTERN } from '../engine/ids.ts';
import { LIMITS } from './discovery.ts';
import { HostError } from './problem.ts';
import { parseStrictJson } from './strict-json.ts';
import { type HttpRequest, headerRepeated, headerValue } from './types.ts';

/**
 * Query parameters with exact names: unknown, repeated or badly encoded parameters are refused
 * (HA-13). Returns decoded values.
 */
export function parseQuery(rawQuery: string, allowed: readonly string[]): Record<string, string> {
  const out: Record<string, string> = {};
  if (rawQuery === '') return out;
  for (const part of rawQuery.split('&')) {
    const eq = part.indexOf('=');
    const rawName = eq === -1 ? part : part.slice(0, eq);
    const rawValue = eq === -1 ? '' : part.slice(eq + 1);
    let name: string;
    let value: string;
    try {
      name = decodeURIComponent(rawName.replaceAll('+', ' '));
      value = decodeURIComponent(rawValue.replaceAll('+', ' '));
    } catch {
      throw new HostError('invalid_request', 'the query string is not valid percent-encoding');
    }
    if (!allowed.includes(name))
      throw new HostError('invalid_request', `unknown query parameter ${JSON.stringify(name.slice(0, 64))}`);
    if (name in out) throw new HostError('invalid_request', `query parameter ${name} is repeated`);
    out[name] = value;
  }
  return out;
}

export function requireNoQuery(req: HttpRequest): void {
  if (req.rawQuery !== '') throw new HostError('invalid_request', 'this endpoint takes no query parameters');
}

export function idempotencyKey(req: HttpRequest): string {
  const key = headerValue(req, 'idempotency-key');
  if (key === undefined) throw new HostError('invalid_request', 'Idempotency-Key is required');
  if (headerRepeated(req, 'idempotency-key') || !IDEMPOTENCY_KEY_PATTERN.test(key)) {
    throw new HostError('invalid_request', 'Idempotency-Key must be 16..128 characters of [A-Za-z0-9._:-]');
  }
  return key;
}

export function expectedGeneration(req: HttpRequest): number {
  const raw = headerValue(req, 'takoform-expected-generation');
  if (raw === undefined) {
    throw new HostError('expected_generation_required', 'Takoform-Expected-Generation is required');
  }
  if (
    headerRepeated(req, 'takoform-expected-generation') ||
    !/^(0|[1-9][0-9]{0,15})$/.test(raw) ||
    !Number.isSafeInteger(Number(raw))
  ) {
    throw new HostError(
      'invalid_request',
      'Takoform-Expected-Generation must be a canonical decimal integer',
    );
  }
  return Number(raw);
}

/** A JSON body: `application/json` (UTF-8), strict parsing (HA-13). */
export function jsonBody(req: HttpRequest): unknown {
  const type = headerValue(req, 'content-type');
  const [media, ...params] = (type ?? '').split(';').map((s) => s.trim().toLowerCase());
  if (media !== 'application/json') {
    throw new HostError('unsupported_media_type', 'send the body as application/json');
  }
  for (const p of params) {
    if (p.startsWith('charset=') && p !== 'charset=utf-8' && p !== 'charset="utf-8"') {
      throw new HostError('unsupported_media_type', 'JSON bodies are UTF-8');
    }
  }
  if (!req.body || req.body.length === 0)
    throw new HostError('invalid_request', 'the request needs a JSON body');
  // The node server caps the socket read too; behind API Gateway this is the only check (HA-13).
  if (req.body.length > LIMITS.maxRequestBytes) {
    throw new HostError('request_too_large', `the body is over ${LIMITS.maxRequestBytes} bytes`);
  }
  try {
    return parseStrictJson(req.body);
  } catch (err) {
    throw new HostError('invalid_request', `the body is not acceptable JSON (${(err as Error).message})`);
  }
}

export function requireNoBody(req: HttpRequest): void {
  if (req.body && req.body.length > 0) throw new HostError('invalid_request', 'this request takes no body');
}

/** One decoded path segment that follows the identifier grammar, else 404. */
export function idSegment(raw: string): string {
  let value: string;
  try {
    value = decodeURIComponent(raw);
  } catch {
    throw new HostError('not_found');
  }
  if (!ID_PATTERN.test(value)) throw new HostError('not_found');
  return value;
}

export function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
