import { randomBytes } from 'node:crypto';
import { expect } from 'vitest';
import { hashApiKey, StaticKeyAuthenticator } from '../../../lambdas/engine/auth.ts';
import { CursorCodec } from '../../../lambdas/engine/cursor.ts';
import { OperationExecutor } from '../../../lambdas/engine/executor.ts';
import {
  type Backend,
  type Execution,
  type Form,
  formRegistry,
  type Outcome,
  SpecError,
} from '../../../lambdas/engine/forms.ts';
import { HostEngine } from '../../../lambdas/engine/host-engine.ts';
import type { JsonObject } from '../../../lambdas/engine/model.ts';
import { createApiRoutes } from '../../../lambdas/http/api-routes.ts';
import { LIMITS } from '../../../lambdas/http/discovery.ts';
import { createHttpHandler, type HttpHandler } from '../../../lambdas/http/handler.ts';
import { API_ROOT } from '../../../lambdas/http/origin.ts';
import type { ParsedResponse, RequestOptions, TestHost, TestPrincipal } from '../../support/host-harness.ts';

export const UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;

/** The Problem Details shape every refusal must have (host-api-v2 §13). */
export function expectProblem(res: ParsedResponse, status: number, code?: string): void {
  expect(res.status).toBe(status);
  expect(res.headers['content-type']?.split(';')[0]?.trim().toLowerCase()).toBe('application/problem+json');
  expect(res.body.type).toBe('about:blank');
  expect(typeof res.body.title).toBe('string');
  expect(res.body.status).toBe(status);
  expect(typeof res.body.code).toBe('string');
  expect(res.body.code).toMatch(/^[a-z][a-z0-9_]{0,63}$/);
  if (code !== undefined) expect(res.body.code).toBe(code);
  // A refusal is never an Operation.
  expect(res.body.id).toBeUndefined();
  expect(res.body.resourceUid).toBeUndefined();
  expect(res.headers.location).toBeUndefined();
}

/** A counter around a worker registry lookup, optionally gated on a promise the test controls. */
export function countLookups(host: TestHost) {
  const original = host.workers.lookup.bind(host.workers);
  const state = {
    calls: 0,
    gate: undefined as Promise<void> | undefined,
    entered: undefined as (() => void) | undefined,
  };
  host.workers.lookup = async (space, name) => {
    state.calls++;
    state.entered?.();
    if (state.gate) await state.gate;
    return original(space, name);
  };
  return state;
}

/** A promise and its resolver. */
export function deferred<T = void>() {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

/**
 * A test Form: spec is an object whose only allowed field `n` is a number. Its backend counts
 * execute and reconcile calls, and each call's result is scripted by the test.
 */
export class ScriptedForm implements Form {
  readonly executed: Execution[] = [];
  readonly reconciled: Execution[] = [];
  onExecute: (e: Execution) => Promise<Outcome> = async () => ({ kind: 'complete', observed: { ok: true } });
  onReconcile: (e: Execution) => Promise<Outcome> = async () => ({
    kind: 'complete',
    observed: { ok: true },
  });
  readonly backend: Backend;
  readonly url: string;

  constructor(url = 'https://forms.example.test/Scripted/1.0.0/') {
    this.url = url;
    this.backend = {
      execute: (e) => {
        this.executed.push(e);
        return this.onExecute(e);
      },
      reconcile: (e) => {
        this.reconciled.push(e);
        return this.onReconcile(e);
      },
    };
  }

  validateCreate(spec: unknown): JsonObject {
    if (typeof spec !== 'object' || spec === null || Array.isArray(spec))
      throw new SpecError('not an object');
    for (const [k, v] of Object.entries(spec)) {
      if (k !== 'n' || typeof v !== 'number') throw new SpecError('only a number n is allowed');
    }
    return { ...spec };
  }

  validateUpdate(spec: unknown): JsonObject {
    return this.validateCreate(spec);
  }
}

/**
 * The real engine and HTTP core over the test host's store, serving other Forms (the harness
 * only wires ModuleWorker). Same principals and tokens as the harness.
 */
export function customStack(host: TestHost, forms: Form[], clock: () => number = Date.now) {
  const registry = formRegistry(forms);
  const authenticator = new StaticKeyAuthenticator(
    Object.values(host.principals).map((p) => ({
      keyHash: hashApiKey(p.token),
      principal: p.id,
      spaces: p.spaces,
    })),
  );
  const engine = new HostEngine({
    store: host.store,
    forms: registry,
    cursors: new CursorCodec(randomBytes(32)),
    replayWindowSeconds: LIMITS.replayWindowSeconds,
    clock,
  });
  const api = createApiRoutes({ origin: () => host.origin, engine, forms: registry, authenticator });
  const http = createHttpHandler({ origin: host.origin, api });
  const executor = (opts: { clock?: () => number; leaseMs?: number } = {}) =>
    new OperationExecutor({ store: host.store, forms: registry, ...opts });
  const request = (r: RequestOptions) => send(http, host.principals.alice as TestPrincipal, r);
  return { engine, http, executor, request, forms: registry };
}

/** The harness's request logic against any HTTP core. */
export async function send(
  http: HttpHandler,
  defaultPrincipal: TestPrincipal,
  r: RequestOptions,
): Promise<ParsedResponse> {
  const headers: Record<string, string[]> = {};
  const who = r.as === undefined ? defaultPrincipal : r.as;
  if (who) headers.authorization = [`Bearer ${who.token}`];
  let body: Uint8Array | undefined;
  if (r.rawBody !== undefined) {
    body = typeof r.rawBody === 'string' ? new TextEncoder().encode(r.rawBody) : r.rawBody;
  } else if (r.body !== undefined) {
    body = new TextEncoder().encode(JSON.stringify(r.body));
    headers['content-type'] = ['application/json'];
  }
  for (const [k, v] of Object.entries(r.headers ?? {})) headers[k.toLowerCase()] = Array.isArray(v) ? v : [v];
  const out = await http({
    method: r.method ?? 'GET',
    path: r.path.startsWith('/.well-known') ? r.path : `${API_ROOT}${r.path}`,
    rawQuery: r.query ?? '',
    headers,
    body,
  });
  return { status: out.status, headers: out.headers, body: out.body ? JSON.parse(out.body) : undefined };
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls until the check holds (bounded), for states reached by work running in the background. */
export async function until<T>(read: () => Promise<T>, ok: (v: T) => boolean, ms = 5_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await read();
    if (ok(v)) return v;
    if (Date.now() > end) return v;
    await sleep(10);
  }
}
