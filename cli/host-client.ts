import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { type Connection, keyHint } from './connection.ts';
import { RefusedError } from './errors.ts';

export const API_ROOT = '/apis/forms.takoform.com/v2';
export const EXT_ROOT = '/ext/queues/v1';

/** A parsed JSON answer; each command reads the fields it needs. */
// biome-ignore lint/suspicious/noExplicitAny: JSON from the Host, read field by field
export type Json = any;

export interface Resource {
  uid: string;
  form: string;
  space: string;
  name: string;
  generation: number;
  phase: string;
  spec: Json;
  observed: Json;
  observedAt?: string | null;
}

export interface Operation {
  id: string;
  resourceUid: string;
  status: string;
  error?: { code: string; message?: string };
}

const REQUEST_TIMEOUT_MS = 30_000;
/** Tries of one request when the Host is unreachable or answers 503 (the same idempotency key). */
const TRIES = 3;

function networkCode(err: unknown): string {
  const cause = (err as { cause?: { code?: string; message?: string } })?.cause;
  return cause?.code ?? cause?.message ?? (err as Error)?.name ?? 'network error';
}

/** Requests to one Host with one key; every refusal becomes a `RefusedError`. */
export class HostClient {
  private readonly c: Connection;

  constructor(connection: Connection) {
    this.c = connection;
  }

  async request(
    method: string,
    path: string,
    o: { body?: unknown; headers?: Record<string, string>; idempotent?: boolean } = {},
  ): Promise<Json> {
    const headers: Record<string, string> = { authorization: `Bearer ${this.c.key}`, ...o.headers };
    if (o.body !== undefined) headers['content-type'] = 'application/json';
    const retryable = o.idempotent ?? method === 'GET';
    for (let attempt = 1; ; attempt++) {
      let res: Response;
      try {
        res = await fetch(`${this.c.origin}${path}`, {
          method,
          headers,
          body: o.body === undefined ? undefined : JSON.stringify(o.body),
          redirect: 'manual',
          signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
        });
      } catch (err) {
        if (retryable && attempt < TRIES) {
          await sleep(500 * attempt);
          continue;
        }
        throw new RefusedError('unreachable', `could not reach ${this.c.origin} (${networkCode(err)})`);
      }
      const text = await res.text();
      if (res.status === 503 && retryable && attempt < TRIES) {
        await sleep(1000 * attempt);
        continue;
      }
      let body: Json;
      try {
        body = text ? JSON.parse(text) : undefined;
      } catch {
        throw new RefusedError('invalid_response', `${method} ${path} answered ${res.status} without JSON`);
      }
      if (res.status >= 400) {
        const detail = typeof body?.detail === 'string' ? body.detail : (body?.title ?? `HTTP ${res.status}`);
        throw new RefusedError(
          typeof body?.code === 'string' ? body.code : `http_${res.status}`,
          res.status === 401 ? `${detail}; ${keyHint(this.c)}` : detail,
          res.status,
        );
      }
      return body;
    }
  }

  /** Every Resource of a Space (optionally of one Form or name), following cursors. */
  async list(space: string, q: { form?: string; name?: string } = {}): Promise<Resource[]> {
    const out: Resource[] = [];
    let cursor: string | undefined;
    do {
      const params = new URLSearchParams({ space, limit: '100' });
      if (q.form) params.set('form', q.form);
      if (q.name) params.set('name', q.name);
      if (cursor) params.set('cursor', cursor);
      const page = await this.request('GET', `${API_ROOT}/resources?${params}`);
      out.push(...page.items);
      cursor = page.nextCursor ?? undefined;
    } while (cursor);
    return out;
  }

  /** The live Resource of that Form and name, or undefined. */
  async find(space: string, form: string, name: string): Promise<Resource | undefined> {
    return (await this.list(space, { form, name }))[0];
  }

  /** A mutation with a fresh idempotency key, retried with that same key when the Host was unreachable. */
  mutate(
    method: 'POST' | 'PUT' | 'DELETE',
    path: string,
    body?: unknown,
    generation?: number,
  ): Promise<Operation> {
    const headers: Record<string, string> = { 'idempotency-key': `takoform-cli-${randomUUID()}` };
    if (generation !== undefined) headers['takoform-expected-generation'] = String(generation);
    return this.request(method, `${API_ROOT}${path}`, { body, headers, idempotent: true });
  }

  /**
   * Polls an Operation until it is terminal; `onWait` hears about one still running after a
   * while. A failed Operation is a `RefusedError` with its error code.
   */
  async waitFor(op: Operation, timeoutMs: number, onWait?: (op: Operation) => void): Promise<Operation> {
    const deadline = Date.now() + timeoutMs;
    let current = op;
    let told = false;
    for (let delay = 100; current.status !== 'succeeded' && current.status !== 'failed'; ) {
      if (Date.now() > deadline) {
        throw new RefusedError('timeout', `Operation ${current.id} is still ${current.status}`);
      }
      if (!told && Date.now() > deadline - timeoutMs + 2_000) {
        onWait?.(current);
        told = true;
      }
      await sleep(delay);
      delay = Math.min(delay * 2, 1_000);
      current = await this.request('GET', `${API_ROOT}/operations/${encodeURIComponent(current.id)}`);
    }
    if (current.status === 'failed') {
      throw new RefusedError(
        current.error?.code ?? 'operation_failed',
        current.error?.message ?? `Operation ${current.id} failed`,
      );
    }
    return current;
  }
}
