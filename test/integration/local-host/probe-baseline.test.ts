import { describe, expect, it } from 'vitest';
import {
  BaselineProbeError,
  loopbackTransport,
  type ProbeFixture,
  type ProbeRequest,
  type ProbeTransport,
  runBaselineProbe,
} from '../../support/baseline-probe.ts';
import {
  hostClient,
  MODULE_WORKER_FORM,
  useHostProcesses,
  writeWorker,
} from '../../support/local-host-process.ts';

const QUEUE_FORM = 'https://edge.forms.takoform.com/forms/AtLeastOnceQueue/0.2.0/';
const CONSUMER_FORM = 'https://edge.forms.takoform.com/forms/QueueConsumer/0.3.0/';

const UNKNOWN_FORM = 'https://forms.example.test/unknown/0.1.0';

// ---------------------------------------------------------------------------------------------
// The probe against the real Host process (HA-16)

const PUBLIC_ORIGIN = 'https://conformance.takoform.test';

/**
 * One line per supported Form; `worker` names a Worker module the fixture needs. The consumer's
 * queue and worker are created first (`refs`), since a QueueConsumer must reference live ones.
 */
function liveFixtures(
  run: string,
  refs: { queue: string; worker: string },
): (ProbeFixture & { worker?: string })[] {
  const consumerSpec = {
    queue: { resourceUid: refs.queue },
    worker: { resourceUid: refs.worker },
    maxBatchSize: 10,
    maxBatchTimeoutSeconds: 1,
    maxConcurrency: 2,
    maxRetries: 3,
    retryDelaySeconds: 30,
  };
  return [
    {
      form: MODULE_WORKER_FORM,
      unknownForm: UNKNOWN_FORM,
      space: 'default',
      name: `probe-mw-${run}`,
      spec: {},
      expectedSpec: {},
      worker: `probe-mw-${run}`,
    },
    {
      form: QUEUE_FORM,
      unknownForm: UNKNOWN_FORM,
      space: 'default',
      name: `probe-q-${run}`,
      spec: { messageRetentionSeconds: 3600, deliveryDelaySeconds: 0 },
      expectedSpec: { messageRetentionSeconds: 3600, deliveryDelaySeconds: 0 },
    },
    {
      form: CONSUMER_FORM,
      unknownForm: UNKNOWN_FORM,
      space: 'default',
      name: `probe-c-${run}`,
      spec: consumerSpec,
      expectedSpec: consumerSpec,
    },
  ];
}

describe('HA-16 baseline probe against `npm start`', () => {
  const hosts = useHostProcesses();

  it('passes the §16.2 sequence over real HTTP for every served Form', async () => {
    const workersDir = hosts.tempDir();
    const run = Date.now().toString(36);
    writeWorker(workersDir, 'default', `probe-target-w-${run}`);
    writeWorker(workersDir, 'default', `probe-mw-${run}`);
    const host = await hosts.start({ workersDir, args: ['--public-origin', PUBLIC_ORIGIN] });
    // The consumer fixture's targets: a live queue and a worker with a queue handler.
    const client = hostClient(host);
    const made: Record<string, string> = {};
    for (const [key, form, name, spec] of [
      ['queue', QUEUE_FORM, `probe-target-q-${run}`, { messageRetentionSeconds: 3600 }],
      ['worker', MODULE_WORKER_FORM, `probe-target-w-${run}`, {}],
    ] as const) {
      const res = await client.request('POST', '/resources', {
        body: { form, space: 'default', name, spec },
        headers: { 'idempotency-key': `probe-refs-${key}-${run}` },
      });
      expect(res.status).toBe(202);
      expect((await client.waitTerminal(res.body.id)).body.status).toBe('succeeded');
      made[key] = res.body.resourceUid;
    }
    const fixtures = liveFixtures(run, { queue: made.queue as string, worker: made.worker as string });
    expect(host.ready.origin).toBe(PUBLIC_ORIGIN);
    expect(host.ready.apiKey).toBeTypeOf('string');

    const transport = loopbackTransport({
      publicOrigin: PUBLIC_ORIGIN,
      loopback: host.loopback,
      apiKey: host.ready.apiKey as string,
    });
    const result = await runBaselineProbe({
      origin: PUBLIC_ORIGIN,
      transport,
      fixtures,
      maxPolls: 50,
      pollDelayMs: 200,
    });
    expect(result.baseline).toBe('passed');
    expect(result.baseUrl).toBe(`${PUBLIC_ORIGIN}/apis/forms.takoform.com/v2`);
    expect(result.forms.map((r) => r.form)).toEqual(fixtures.map((f) => f.form));
    expect(transport.requests).toBeGreaterThanOrEqual(20 * fixtures.length);

    // The transport itself never leaves the public origin.
    await expect(
      transport({
        method: 'GET',
        url: 'https://elsewhere.example.test/.well-known/takoform/v2',
        headers: {},
        authenticated: false,
        signal: AbortSignal.timeout(1000),
      }),
    ).rejects.toThrow(/off the public origin/);

    expect(await host.stop('SIGTERM')).toEqual({ code: 0, signal: null });
  });
});

// ---------------------------------------------------------------------------------------------
// Self-tests: the probe must reject broken Hosts (an in-memory fake with one defect at a time)

type Defect =
  | 'none'
  | 'replay-new-operation'
  | 'terminal-as-202'
  | 'accept-stale-generation'
  | 'location-with-slash'
  | 'retention-not-extended'
  | 'never-settles'
  | 'update-keeps-generation'
  | 'list-keeps-deleted'
  | 'delete-replay-gone'
  | 'problem-as-json'
  | 'no-retry-after';

const FAKE_ORIGIN = 'https://fake-host.example.test';
const FAKE_BASE = `${FAKE_ORIGIN}/custom/api`;
const FAKE_FORMS = [
  'https://forms.example.test/self-test-a/0.1.0',
  'https://forms.example.test/self-test-b/0.1.0',
];
const WINDOW_S = 3600;

// biome-ignore lint/suspicious/noExplicitAny: JSON from the Host under test, checked field by field
type Json = Record<string, any>;

/** A tiny Host API v2 in memory: mutations are queued and settle on the first read of their Operation. */
function fakeHost(defect: Defect) {
  const resources = new Map<string, Json>();
  const operations = new Map<string, Json>();
  const keys = new Map<string, { signature: string; opId: string }>();
  let clock = Date.parse('2026-01-01T00:00:00Z');
  let seq = 0;
  const stats = { calls: 0 };

  const send = (status: number, body: unknown, headers: Record<string, string> = {}) => {
    const media =
      status < 400 || defect === 'problem-as-json' ? 'application/json' : 'application/problem+json';
    return new Response(JSON.stringify(body), {
      status,
      headers: { 'content-type': `${media}; charset=utf-8`, ...headers },
    });
  };
  const problem = (status: number, code: string) =>
    send(status, { type: 'about:blank', title: 'Refused', status, code });
  const iso = (ms: number) => new Date(ms).toISOString();

  const settle = (op: Json) => {
    if (op.status === 'succeeded') return;
    op.status = 'succeeded';
    op.effect = 'complete';
    op.updatedAt = iso(clock);
    if (defect !== 'retention-not-extended') op.retainUntil = iso(clock + WINDOW_S * 1000);
    const r = resources.get(op.resourceUid) as Json;
    r.observedGeneration = op.generation;
    r.observedAt = iso(clock);
    r.phase = 'idle';
    if (op.action === 'delete') r.deleted = true;
  };

  const acceptedResponse = (op: Json) => {
    const terminal = op.status === 'succeeded';
    const headers: Record<string, string> = {
      location:
        defect === 'location-with-slash'
          ? `${FAKE_BASE}/operations/${op.id}/`
          : `${FAKE_BASE}/operations/${op.id}`,
    };
    if (!terminal && defect !== 'no-retry-after') headers['retry-after'] = '1';
    const body = defect === 'replay-new-operation' && op.replayed ? { ...op, id: 'op-rogue' } : op;
    const { replayed: _, ...visible } = body;
    return send(terminal ? 200 : 202, visible, headers);
  };

  const newOperation = (action: string, resourceUid: string, generation: number): Json => {
    const op: Json = {
      id: `op-${++seq}`,
      resourceUid,
      action,
      generation,
      status: 'queued',
      effect: 'none',
      createdAt: iso(clock),
      updatedAt: iso(clock),
      retainUntil: iso(clock + WINDOW_S * 1000),
    };
    operations.set(op.id, op);
    if (defect === 'terminal-as-202') {
      settle(op);
      return { ...op, replayed: false, forceAccepted: true };
    }
    return op;
  };

  const view = (r: Json) => {
    const { deleted: _, ...rest } = r;
    return rest;
  };

  const transport: ProbeTransport = async (req: ProbeRequest) => {
    stats.calls++;
    clock += 1000;
    const url = new URL(req.url);
    if (url.origin !== FAKE_ORIGIN) throw new Error('off origin');
    if (url.pathname === '/.well-known/takoform/v2') {
      if (req.authenticated) return problem(400, 'invalid_request');
      return send(200, {
        api: 'forms.takoform.com/v2',
        baseUrl: FAKE_BASE,
        documentation: `${FAKE_ORIGIN}/docs`,
        authentication: { schemes: ['Bearer'], documentation: `${FAKE_ORIGIN}/docs/auth` },
        capabilities: { offerings: false, previews: false, privateInputs: false },
        limits: { maxRequestBytes: 100_000, maxPageSize: 100, replayWindowSeconds: WINDOW_S },
      });
    }
    if (!req.authenticated) return problem(401, 'unauthenticated');
    const path = url.pathname.slice('/custom/api'.length);
    const key = req.headers['Idempotency-Key'];
    const signature = JSON.stringify([
      req.method,
      path,
      req.headers['Takoform-Expected-Generation'],
      req.body,
    ]);
    const replay = () => {
      const known = key === undefined ? undefined : keys.get(key);
      if (!known) return undefined;
      if (known.signature !== signature) return problem(409, 'idempotency_conflict');
      const op = operations.get(known.opId) as Json;
      return acceptedResponse({ ...op, replayed: true });
    };
    const remember = (op: Json) => {
      keys.set(key as string, { signature, opId: op.id });
      if (op.forceAccepted) {
        const { forceAccepted: _, replayed: __, ...visible } = op;
        return send(202, visible, { location: `${FAKE_BASE}/operations/${op.id}`, 'retry-after': '1' });
      }
      return acceptedResponse(op);
    };

    if (path === '/support' && req.method === 'GET') {
      const form = url.searchParams.get('form') ?? '';
      const supported = FAKE_FORMS.includes(form);
      return send(200, {
        form,
        supported,
        operations: supported ? ['create', 'read', 'update', 'delete'] : [],
        privateInputs: false,
      });
    }
    if (path === '/resources' && req.method === 'POST') {
      const prior = replay();
      if (prior) return prior;
      const b = req.body as Json;
      if (!FAKE_FORMS.includes(b.form)) return problem(422, 'unsupported_form');
      const uid = `res-${++seq}`;
      resources.set(uid, {
        uid,
        form: b.form,
        space: b.space,
        name: b.name,
        generation: 1,
        observedGeneration: 0,
        observedAt: null,
        phase: 'pending',
        spec: b.spec,
        observed: {},
        output: {},
        lastOperation: '',
      });
      const op = newOperation('create', uid, 1);
      (resources.get(uid) as Json).lastOperation = op.id;
      return remember(op);
    }
    if (path === '/resources' && req.method === 'GET') {
      const q = url.searchParams;
      const items = [...resources.values()].filter(
        (r) =>
          (!r.deleted || defect === 'list-keeps-deleted') &&
          r.space === q.get('space') &&
          r.name === q.get('name') &&
          r.form === q.get('form'),
      );
      return send(200, { items: items.map(view), nextCursor: null });
    }
    const resourceMatch = /^\/resources\/([^/]+)$/.exec(path);
    if (resourceMatch) {
      const r = resources.get(resourceMatch[1] as string);
      if (req.method === 'GET') {
        if (!r) return problem(404, 'not_found');
        return r.deleted ? problem(410, 'gone') : send(200, view(r));
      }
      if (defect === 'delete-replay-gone' && r?.deleted) return problem(410, 'gone');
      const prior = replay();
      if (prior) return prior;
      if (!r) return problem(404, 'not_found');
      if (r.deleted) return problem(410, 'gone');
      const expected = req.headers['Takoform-Expected-Generation'];
      if (expected !== String(r.generation) && defect !== 'accept-stale-generation') {
        return problem(409, 'generation_conflict');
      }
      if (defect !== 'update-keeps-generation' || req.method === 'DELETE') r.generation++;
      if (req.method === 'PUT') r.spec = (req.body as Json).spec;
      if (req.method === 'DELETE') r.phase = 'deleting';
      const op = newOperation(req.method === 'PUT' ? 'update' : 'delete', r.uid, r.generation);
      r.lastOperation = op.id;
      return remember(op);
    }
    const opMatch = /^\/operations\/([^/]+)$/.exec(path);
    if (opMatch && req.method === 'GET') {
      const op = operations.get(opMatch[1] as string);
      if (!op) return problem(404, 'not_found');
      if (defect !== 'never-settles') settle(op);
      return send(200, op);
    }
    return problem(404, 'not_found');
  };
  return { transport, stats };
}

const fakeFixtures = (): ProbeFixture[] =>
  FAKE_FORMS.map((form, i) => ({
    form,
    unknownForm: UNKNOWN_FORM,
    space: 'team',
    name: `fixture-${i}`,
    spec: { value: 'sample', n: i },
    expectedSpec: { n: i, value: 'sample' },
  }));

describe('baseline probe self-test (fake Host)', () => {
  it('passes a healthy fake Host for each fixture', async () => {
    const fake = fakeHost('none');
    const result = await runBaselineProbe({
      origin: FAKE_ORIGIN,
      transport: fake.transport,
      fixtures: fakeFixtures(),
    });
    expect(result).toEqual({
      baseline: 'passed',
      baseUrl: FAKE_BASE,
      forms: [
        expect.objectContaining({ form: FAKE_FORMS[0] }),
        expect.objectContaining({ form: FAKE_FORMS[1] }),
      ],
    });
  });

  it.each<[Defect, string]>([
    ['replay-new-operation', 'create-replay'],
    ['terminal-as-202', 'create'],
    ['accept-stale-generation', 'stale-generation'],
    ['location-with-slash', 'create'],
    ['retention-not-extended', 'create-poll'],
    ['never-settles', 'create-poll'],
    ['update-keeps-generation', 'update'],
    ['list-keeps-deleted', 'list-after-delete'],
    ['delete-replay-gone', 'delete-replay'],
    ['problem-as-json', 'unknown-create'],
    ['no-retry-after', 'create'],
  ])('rejects a broken Host (%s) at step %s', async (defect, step) => {
    const fake = fakeHost(defect);
    const run = runBaselineProbe({
      origin: FAKE_ORIGIN,
      transport: fake.transport,
      fixtures: fakeFixtures(),
    });
    await expect(run).rejects.toBeInstanceOf(BaselineProbeError);
    await expect(run).rejects.toMatchObject({ step, form: FAKE_FORMS[0] });
  });

  it('rejects a spec that differs from expectedSpec', async () => {
    const fake = fakeHost('none');
    const fixtures = fakeFixtures().map((f) => ({ ...f, expectedSpec: { value: 'other' } }));
    await expect(
      runBaselineProbe({ origin: FAKE_ORIGIN, transport: fake.transport, fixtures }),
    ).rejects.toMatchObject({
      step: 'read',
    });
  });

  it('reports a transport failure at the step it happened', async () => {
    const transport: ProbeTransport = async () => {
      throw new Error('connection refused');
    };
    await expect(
      runBaselineProbe({ origin: FAKE_ORIGIN, transport, fixtures: fakeFixtures() }),
    ).rejects.toMatchObject({
      step: 'discovery',
    });
  });

  it('times out a body that never ends', async () => {
    const transport: ProbeTransport = async () =>
      new Response(
        new ReadableStream({
          start(c) {
            c.enqueue(new TextEncoder().encode('{'));
          },
        }),
        { status: 200, headers: { 'content-type': 'application/json' } },
      );
    await expect(
      runBaselineProbe({ origin: FAKE_ORIGIN, transport, fixtures: fakeFixtures(), timeoutMs: 50 }),
    ).rejects.toMatchObject({ step: 'discovery', message: expect.stringContaining('no answer in 50 ms') });
  });

  it.each<[string, Partial<ProbeFixture> | 'origin']>([
    ['a Form URL with a query', { form: `${FAKE_FORMS[0]}?x` }],
    ['a Form URL with userinfo', { form: 'https://user@forms.example.test/a/0.1.0' }],
    ['an http Form URL', { form: 'http://forms.example.test/a/0.1.0' }],
    ['unknownForm equal to form', { unknownForm: FAKE_FORMS[0] }],
    ['a name longer than 110', { name: 'n'.repeat(111) }],
    ['a bad space', { space: '-team' }],
    ['a non-HTTPS origin', 'origin'],
  ])('refuses %s before sending anything', async (_, change) => {
    const fake = fakeHost('none');
    const fixtures = fakeFixtures().map((f) => (change === 'origin' ? f : { ...f, ...change }));
    const origin = change === 'origin' ? 'http://fake-host.example.test' : FAKE_ORIGIN;
    await expect(runBaselineProbe({ origin, transport: fake.transport, fixtures })).rejects.toBeInstanceOf(
      BaselineProbeError,
    );
    expect(fake.stats.calls).toBe(0);
  });
});
