/**
 * This project's own implementation of the Host API v2 baseline sequence (host-api-v2.md §16.2,
 * requirement HA-16). It is a library: the caller injects the transport, which owns credentials
 * and where requests really go. It creates, updates and deletes one disposable Resource per
 * fixture, so run it only against a Host whose Space may hold throw-away Resources.
 *
 * Failures throw a BaselineProbeError naming the step (names as in §16.2) and the Form. Unlike the
 * public probe, messages may carry statuses and Problem codes to help debugging; they never carry
 * request headers, so credentials stay with the transport.
 */
import { randomUUID } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';

export interface ProbeFixture {
  /** Exact Form URL the Host serves. */
  form: string;
  /** A lexically valid HTTPS Form URL the Host does not serve. */
  unknownForm: string;
  space: string;
  /** Unique per run; at most 110 characters (`-unknown` and `-changed` are appended). */
  name: string;
  spec: Record<string, unknown>;
  /** Compared structurally (key order ignored) with the Resource's `spec`. */
  expectedSpec?: Record<string, unknown>;
}

export interface ProbeRequest {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  url: string;
  /** Keys spelled `Content-Type`, `Idempotency-Key`, `Takoform-Expected-Generation`. */
  headers: Record<string, string>;
  /** A plain JSON value; the transport serializes it. */
  body?: unknown;
  /** False only for discovery. */
  authenticated: boolean;
  signal: AbortSignal;
}

export type ProbeTransport = (request: ProbeRequest) => Promise<Response>;

export interface BaselineProbeOptions {
  /** Bare HTTPS origin of the Host (`https://host.example`). */
  origin: string;
  transport: ProbeTransport;
  /** One run of the sequence per fixture (one per supported Form), after one discovery. */
  fixtures: readonly ProbeFixture[];
  /** Polls per Operation, 1..100 (default 10). */
  maxPolls?: number;
  /** Sleep between polls, 0..60000 ms (default 0). */
  pollDelayMs?: number;
  /** Deadline of each request including its body, 1..60000 ms (default 10000). */
  timeoutMs?: number;
  /** Fresh Idempotency-Key per intent (default `probe-<uuid>`). */
  newKey?: () => string;
}

export interface FormRun {
  form: string;
  resourceUid: string;
  operations: { create: string; update: string; delete: string };
}

export interface BaselineProbeResult {
  baseline: 'passed';
  baseUrl: string;
  forms: FormRun[];
}

export class BaselineProbeError extends Error {
  override name = 'BaselineProbeError';
  readonly step: string;
  readonly form: string | undefined;
  constructor(step: string, reason: string, form?: string) {
    super(`baseline probe${form ? ` [${form}]` : ''} ${step}: ${reason}`);
    this.step = step;
    this.form = form;
  }
}

const ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;
const UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;
const STATUSES = ['queued', 'running', 'waiting_input', 'reconciling', 'succeeded', 'failed'];
const EFFECTS = ['none', 'unknown', 'partial', 'complete'];
const PHASES = ['pending', 'idle', 'deleting', 'error'];
const TERMINAL = new Set(['succeeded', 'failed']);

// biome-ignore lint/suspicious/noExplicitAny: JSON from the Host under test, checked field by field
type Json = Record<string, any>;

interface Reply {
  status: number;
  headers: Headers;
  body: Json;
}

const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
const isUtc = (v: unknown) => typeof v === 'string' && UTC.test(v) && Number.isFinite(Date.parse(v));

/** Printable ASCII with none of `\ ? #`, parsing as an absolute HTTPS URL with a host and no userinfo. */
function lexicalHttpsUrl(value: unknown): URL | undefined {
  if (typeof value !== 'string' || !/^[\x21-\x7e]+$/.test(value) || /[\\?#]/.test(value)) return undefined;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return undefined;
  }
  if (url.protocol !== 'https:' || !url.hostname || /^https:\/\/[^/]*@/.test(value)) return undefined;
  return url;
}

function validateOptions(o: BaselineProbeOptions): void {
  const origin = lexicalHttpsUrl(o.origin);
  if (!origin || origin.origin !== o.origin)
    throw new BaselineProbeError('options', 'origin must be a bare HTTPS origin');
  if (typeof o.transport !== 'function')
    throw new BaselineProbeError('options', 'transport must be a function');
  const bounded = (name: string, v: number | undefined, min: number, max: number) => {
    if (v !== undefined && (!Number.isSafeInteger(v) || v < min || v > max)) {
      throw new BaselineProbeError('options', `${name} must be an integer in ${min}..${max}`);
    }
  };
  bounded('maxPolls', o.maxPolls, 1, 100);
  bounded('pollDelayMs', o.pollDelayMs, 0, 60_000);
  bounded('timeoutMs', o.timeoutMs, 1, 60_000);
  if (!Array.isArray(o.fixtures) || o.fixtures.length === 0) {
    throw new BaselineProbeError('fixture', 'at least one fixture is required');
  }
  for (const f of o.fixtures) {
    if (!isObject(f)) throw new BaselineProbeError('fixture', 'must be an object');
    if (!lexicalHttpsUrl(f.form))
      throw new BaselineProbeError('fixture.form', 'not a lexically valid HTTPS Form URL');
    if (!lexicalHttpsUrl(f.unknownForm) || f.unknownForm === f.form) {
      throw new BaselineProbeError('fixture.unknownForm', 'must be a valid HTTPS Form URL other than form');
    }
    if (typeof f.space !== 'string' || !ID.test(f.space))
      throw new BaselineProbeError('fixture.space', 'bad id');
    if (typeof f.name !== 'string' || !ID.test(f.name) || f.name.length > 110) {
      throw new BaselineProbeError('fixture.name', 'bad id or longer than 110 characters');
    }
    if (!isObject(f.spec)) throw new BaselineProbeError('fixture.spec', 'must be an object');
    if (f.expectedSpec !== undefined && !isObject(f.expectedSpec)) {
      throw new BaselineProbeError('fixture.expectedSpec', 'must be an object');
    }
  }
}

/** Runs the baseline sequence once per fixture; resolves only if every check held. */
export async function runBaselineProbe(o: BaselineProbeOptions): Promise<BaselineProbeResult> {
  validateOptions(o);
  const maxPolls = o.maxPolls ?? 10;
  const pollDelayMs = o.pollDelayMs ?? 0;
  const timeoutMs = o.timeoutMs ?? 10_000;
  const newKey = o.newKey ?? (() => `probe-${randomUUID()}`);
  let form: string | undefined;
  const fail = (step: string, reason: string): never => {
    throw new BaselineProbeError(step, reason, form);
  };

  /** One request under its deadline; checks the status set and the media type. */
  async function exchange(
    step: string,
    req: Omit<ProbeRequest, 'signal' | 'authenticated'> & { authenticated?: boolean },
    allowed: readonly number[],
  ): Promise<Reply> {
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), timeoutMs);
    let res: Response;
    let text: string;
    try {
      const aborted = new Promise<never>((_, reject) => {
        controller.signal.addEventListener('abort', () => reject(new Error(`no answer in ${timeoutMs} ms`)));
      });
      aborted.catch(() => {});
      res = await Promise.race([
        o.transport({ ...req, authenticated: req.authenticated ?? true, signal: controller.signal }),
        aborted,
      ]);
      text = await Promise.race([res.text(), aborted]);
    } catch (err) {
      return fail(step, `transport or body failed (${(err as Error).message})`);
    } finally {
      clearTimeout(timer);
    }
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      body = undefined;
    }
    const code = isObject(body) && typeof body.code === 'string' ? ` (${body.code})` : '';
    if (!allowed.includes(res.status))
      fail(step, `status ${res.status}${code}, expected ${allowed.join('/')}`);
    const media = (res.headers.get('content-type') ?? '').split(';')[0]?.trim().toLowerCase();
    const want = res.status < 400 ? 'application/json' : 'application/problem+json';
    if (media !== want) fail(step, `media type ${JSON.stringify(media)}, expected ${want}`);
    if (!isObject(body)) fail(step, 'the body is not a JSON object');
    return { status: res.status, headers: res.headers, body: body as Json };
  }

  function checkProblem(step: string, r: Reply, codes: readonly string[]): void {
    const p = r.body;
    if (p.type !== 'about:blank') fail(step, 'Problem type is not about:blank');
    if (typeof p.title !== 'string') fail(step, 'Problem title is not a string');
    if (p.status !== r.status) fail(step, `Problem status ${p.status} differs from HTTP ${r.status}`);
    if (!codes.includes(p.code))
      fail(step, `Problem code ${JSON.stringify(p.code)}, expected ${codes.join('/')}`);
  }

  // ---- discovery
  const discovery = await exchange(
    'discovery',
    { method: 'GET', url: `${o.origin}/.well-known/takoform/v2`, headers: {}, authenticated: false },
    [200],
  );
  const d = discovery.body;
  if (d.api !== 'forms.takoform.com/v2') fail('discovery', 'api is not forms.takoform.com/v2');
  const baseUrl = lexicalHttpsUrl(d.baseUrl);
  if (
    !baseUrl ||
    baseUrl.origin !== o.origin ||
    baseUrl.username ||
    baseUrl.password ||
    (d.baseUrl as string).endsWith('/') ||
    (baseUrl.href !== d.baseUrl && baseUrl.href !== `${d.baseUrl}/`)
  ) {
    fail('discovery', 'baseUrl is not a clean same-origin HTTPS URL without a trailing slash');
  }
  const base = d.baseUrl as string;
  if (!lexicalHttpsUrl(d.documentation)) fail('discovery', 'documentation is not an HTTPS URL');
  const auth = d.authentication;
  if (!isObject(auth) || !lexicalHttpsUrl(auth.documentation)) {
    fail('discovery', 'authentication.documentation is not an HTTPS URL');
  }
  if (
    !Array.isArray(auth.schemes) ||
    auth.schemes.length === 0 ||
    !auth.schemes.every((s: unknown) => typeof s === 'string' && s.length > 0)
  ) {
    fail('discovery', 'authentication.schemes must be a non-empty list of non-empty strings');
  }
  const caps = d.capabilities;
  if (
    !isObject(caps) ||
    !['offerings', 'previews', 'privateInputs'].every((k) => typeof caps[k] === 'boolean')
  ) {
    fail('discovery', 'capabilities must hold three booleans');
  }
  const limits = d.limits;
  const limitNames = ['maxRequestBytes', 'maxPageSize', 'replayWindowSeconds'];
  if (!isObject(limits) || !limitNames.every((k) => Number.isSafeInteger(limits[k]) && limits[k] > 0)) {
    fail('discovery', 'limits must hold three positive safe integers');
  }
  // The fixtures carry no Offering selection, which is required exactly when Offerings are advertised.
  if (caps.offerings) fail('offerings', 'the Host advertises Offerings but the fixture selects none');
  const windowMs = (limits.replayWindowSeconds as number) * 1000;

  const runs: FormRun[] = [];
  for (const fixture of o.fixtures) {
    form = fixture.form;
    const f = fixture;
    const filter = `space=${encodeURIComponent(f.space)}&name=${encodeURIComponent(f.name)}&form=${encodeURIComponent(f.form)}`;

    const checkOperation = (
      step: string,
      op: Json,
      want: { action: string; generation: number; resourceUid?: string; id?: string },
    ): void => {
      if (typeof op.id !== 'string' || !ID.test(op.id)) fail(step, 'Operation id is not a token');
      if (want.id !== undefined && op.id !== want.id) fail(step, `Operation id changed to ${op.id}`);
      if (typeof op.resourceUid !== 'string' || !ID.test(op.resourceUid))
        fail(step, 'resourceUid is not a token');
      if (want.resourceUid !== undefined && op.resourceUid !== want.resourceUid) {
        fail(step, `resourceUid ${op.resourceUid} is not ${want.resourceUid}`);
      }
      if (op.action !== want.action) fail(step, `action ${op.action}, expected ${want.action}`);
      if (op.generation !== want.generation)
        fail(step, `generation ${op.generation}, expected ${want.generation}`);
      if (!STATUSES.includes(op.status)) fail(step, `unknown status ${JSON.stringify(op.status)}`);
      if (!EFFECTS.includes(op.effect)) fail(step, `unknown effect ${JSON.stringify(op.effect)}`);
      for (const k of ['createdAt', 'updatedAt', 'retainUntil']) {
        if (!isUtc(op[k])) fail(step, `${k} is not a UTC timestamp`);
      }
      if (Date.parse(op.retainUntil) - Date.parse(op.createdAt) < windowMs) {
        fail(step, 'retainUntil is earlier than acceptance plus the replay window');
      }
      if (op.status === 'succeeded' && op.effect !== 'complete')
        fail(step, 'succeeded without effect complete');
      if (op.status === 'failed') {
        if (op.effect !== 'none' && op.effect !== 'partial')
          fail(step, 'failed with effect other than none/partial');
        if (!isObject(op.error) || typeof op.error.code !== 'string') fail(step, 'failed without error.code');
      }
      if (op.status === 'reconciling' && op.effect === 'none') fail(step, 'reconciling with effect none');
      if (op.status !== 'failed' && op.status !== 'reconciling' && op.error !== undefined) {
        fail(step, `error present on a ${op.status} Operation`);
      }
      if (op.status === 'waiting_input' && !isObject(op.inputRequired))
        fail(step, 'waiting_input without inputRequired');
    };

    /** An accepted mutation's response: Operation body, status 200 iff terminal, Location, Retry-After. */
    const checkAccepted = (step: string, r: Reply, want: Parameters<typeof checkOperation>[2]): Json => {
      checkOperation(step, r.body, want);
      const terminal = TERMINAL.has(r.body.status);
      if (terminal !== (r.status === 200)) fail(step, `HTTP ${r.status} with status ${r.body.status}`);
      if (r.headers.get('location') !== `${base}/operations/${r.body.id}`) {
        fail(
          step,
          `Location ${JSON.stringify(r.headers.get('location'))} is not ${base}/operations/${r.body.id}`,
        );
      }
      if (r.status === 202) {
        const after = r.headers.get('retry-after') ?? '';
        if (!/^\d+$/.test(after) || Number(after) <= 0)
          fail(step, `Retry-After ${JSON.stringify(after)} is not > 0`);
      }
      return r.body;
    };

    /** Polls at least once and at most maxPolls times; the final state must be succeeded. */
    const poll = async (step: string, accepted: Json): Promise<Json> => {
      const want = {
        action: accepted.action as string,
        generation: accepted.generation as number,
        resourceUid: accepted.resourceUid as string,
        id: accepted.id as string,
      };
      let op = accepted;
      for (let i = 0; i < maxPolls; i++) {
        if (i > 0 && pollDelayMs > 0) await new Promise((r) => setTimeout(r, pollDelayMs));
        const r = await exchange(
          step,
          { method: 'GET', url: `${base}/operations/${want.id}`, headers: {} },
          [200],
        );
        op = r.body;
        checkOperation(step, op, want);
        if (TERMINAL.has(op.status)) break;
      }
      if (op.status !== 'succeeded') fail(step, `final status ${op.status}, expected succeeded`);
      if (Date.parse(op.retainUntil) - Date.parse(op.updatedAt) < windowMs) {
        fail(step, 'retainUntil - updatedAt is shorter than replayWindowSeconds');
      }
      return op;
    };

    const readResource = async (step: string, uid: string, generation: number, lastOperation: string) => {
      const r = await exchange(step, { method: 'GET', url: `${base}/resources/${uid}`, headers: {} }, [200]);
      const res = r.body;
      if (res.uid !== uid || res.form !== f.form || res.space !== f.space || res.name !== f.name) {
        fail(step, 'uid, form, space or name differ from the request');
      }
      if (res.generation !== generation) fail(step, `generation ${res.generation}, expected ${generation}`);
      if (res.lastOperation !== lastOperation)
        fail(step, `lastOperation ${res.lastOperation} is not ${lastOperation}`);
      if (
        !Number.isSafeInteger(res.observedGeneration) ||
        res.observedGeneration < 0 ||
        res.observedGeneration > generation
      ) {
        fail(step, 'observedGeneration is not an integer in [0, generation]');
      }
      if (!isObject(res.spec) || !isObject(res.observed) || !isObject(res.output)) {
        fail(step, 'spec, observed and output must be objects');
      }
      if (!PHASES.includes(res.phase)) fail(step, `unknown phase ${JSON.stringify(res.phase)}`);
      if (res.observedAt !== null && !isUtc(res.observedAt)) fail(step, 'observedAt is neither null nor UTC');
      if (f.expectedSpec !== undefined && !isDeepStrictEqual(res.spec, f.expectedSpec)) {
        fail(step, 'spec differs from expectedSpec');
      }
      if ('offering' in res) fail(step, 'offering present on a Host without Offerings');
      return res;
    };

    const list = async (step: string): Promise<string[]> => {
      const r = await exchange(
        step,
        { method: 'GET', url: `${base}/resources?${filter}`, headers: {} },
        [200],
      );
      if (!Array.isArray(r.body.items)) fail(step, 'items is not a list');
      if (r.body.nextCursor !== null && typeof r.body.nextCursor !== 'string') {
        fail(step, 'nextCursor is neither null nor a string');
      }
      return (r.body.items as Json[]).map((i) => i?.uid);
    };

    // ---- support
    const support = await exchange(
      'support',
      { method: 'GET', url: `${base}/support?form=${encodeURIComponent(f.form)}`, headers: {} },
      [200],
    );
    const s = support.body;
    if (s.form !== f.form || s.supported !== true) fail('support', 'the Form is not reported as supported');
    if (
      !Array.isArray(s.operations) ||
      !['create', 'read', 'update', 'delete'].every((x) => s.operations.includes(x))
    ) {
      fail('support', 'operations lack one of create/read/update/delete');
    }
    if (typeof s.privateInputs !== 'boolean') fail('support', 'privateInputs is not a boolean');
    const unknown = await exchange(
      'unknown-support',
      { method: 'GET', url: `${base}/support?form=${encodeURIComponent(f.unknownForm)}`, headers: {} },
      [200],
    );
    const u = unknown.body;
    if (
      u.form !== f.unknownForm ||
      u.supported !== false ||
      !Array.isArray(u.operations) ||
      u.operations.length !== 0 ||
      u.privateInputs !== false
    ) {
      fail('unknown-support', 'expected supported:false, operations:[], privateInputs:false');
    }

    // ---- unknown-create
    const unknownCreate = await exchange(
      'unknown-create',
      {
        method: 'POST',
        url: `${base}/resources`,
        headers: { 'Content-Type': 'application/json', 'Idempotency-Key': newKey() },
        body: { form: f.unknownForm, space: f.space, name: `${f.name}-unknown`, spec: f.spec },
      },
      [422],
    );
    checkProblem('unknown-create', unknownCreate, ['unsupported_form']);

    // ---- create, create-poll, create-replay, changed-input
    const createKey = newKey();
    const createBody = { form: f.form, space: f.space, name: f.name, spec: f.spec };
    const createRequest = {
      method: 'POST' as const,
      url: `${base}/resources`,
      headers: { 'Content-Type': 'application/json', 'Idempotency-Key': createKey },
      body: createBody,
    };
    const created = checkAccepted('create', await exchange('create', createRequest, [200, 202]), {
      action: 'create',
      generation: 1,
    });
    const uid = created.resourceUid as string;
    await poll('create-poll', created);
    const replay = await exchange('create-replay', createRequest, [200, 202]);
    checkAccepted('create-replay', replay, {
      action: 'create',
      generation: 1,
      resourceUid: uid,
      id: created.id,
    });
    const changed = await exchange(
      'changed-input',
      { ...createRequest, body: { ...createBody, name: `${f.name}-changed` } },
      [409],
    );
    checkProblem('changed-input', changed, ['idempotency_conflict']);

    // ---- read, list
    await readResource('read', uid, 1, created.id);
    if (!(await list('list')).includes(uid)) fail('list', 'the filtered list lacks the Resource');

    // ---- stale-generation, read-after-stale
    const stale = await exchange(
      'stale-generation',
      {
        method: 'PUT',
        url: `${base}/resources/${uid}`,
        headers: {
          'Content-Type': 'application/json',
          'Idempotency-Key': newKey(),
          'Takoform-Expected-Generation': '0',
        },
        body: { spec: f.spec },
      },
      [409],
    );
    checkProblem('stale-generation', stale, ['generation_conflict']);
    await readResource('read-after-stale', uid, 1, created.id);

    // ---- update, update-poll, read-after-update
    const update = await exchange(
      'update',
      {
        method: 'PUT',
        url: `${base}/resources/${uid}`,
        headers: {
          'Content-Type': 'application/json',
          'Idempotency-Key': newKey(),
          'Takoform-Expected-Generation': '1',
        },
        body: { spec: f.spec },
      },
      [200, 202],
    );
    const updated = checkAccepted('update', update, { action: 'update', generation: 2, resourceUid: uid });
    if (updated.id === created.id) fail('update', 'the update reused the create Operation id');
    await poll('update-poll', updated);
    await readResource('read-after-update', uid, 2, updated.id);

    // ---- delete, delete-poll, read-after-delete, list-after-delete, delete-replay
    const deleteRequest = {
      method: 'DELETE' as const,
      url: `${base}/resources/${uid}`,
      headers: { 'Idempotency-Key': newKey(), 'Takoform-Expected-Generation': '2' },
    };
    const del = await exchange('delete', deleteRequest, [200, 202]);
    const deleted = checkAccepted('delete', del, { action: 'delete', generation: 3, resourceUid: uid });
    if (deleted.id === updated.id) fail('delete', 'the delete reused the update Operation id');
    await poll('delete-poll', deleted);
    const gone = await exchange(
      'read-after-delete',
      { method: 'GET', url: `${base}/resources/${uid}`, headers: {} },
      [404, 410],
    );
    checkProblem('read-after-delete', gone, ['not_found', 'gone']);
    if ((await list('list-after-delete')).includes(uid))
      fail('list-after-delete', 'the deleted Resource is listed');
    const deleteReplay = await exchange('delete-replay', deleteRequest, [200, 202]);
    checkAccepted('delete-replay', deleteReplay, {
      action: 'delete',
      generation: 3,
      resourceUid: uid,
      id: deleted.id,
    });

    runs.push({
      form: f.form,
      resourceUid: uid,
      operations: { create: created.id, update: updated.id, delete: deleted.id },
    });
  }
  return { baseline: 'passed', baseUrl: base, forms: runs };
}

/**
 * A transport for a Host process on loopback that advertises `publicOrigin`: maps
 * `${publicOrigin}/…` to `${loopback}/…`, refuses any other URL, adds the Bearer key only to
 * authenticated requests and never follows redirects.
 */
export function loopbackTransport(opts: {
  publicOrigin: string;
  loopback: string;
  apiKey: string;
}): ProbeTransport & { requests: number } {
  const transport = async (r: ProbeRequest): Promise<Response> => {
    const url = new URL(r.url);
    if (url.origin !== opts.publicOrigin || !r.url.startsWith(`${opts.publicOrigin}/`)) {
      throw new Error(`refusing a request off the public origin: ${url.origin}`);
    }
    transport.requests++;
    const headers: Record<string, string> = { ...r.headers };
    if (r.authenticated) headers.Authorization = `Bearer ${opts.apiKey}`;
    return fetch(`${opts.loopback}${url.pathname}${url.search}`, {
      method: r.method,
      headers,
      body: r.body === undefined ? undefined : JSON.stringify(r.body),
      redirect: 'manual',
      signal: r.signal,
    });
  };
  transport.requests = 0;
  return transport;
}
