import { beforeAll, describe, expect, it } from 'vitest';
import { createTestHost, FORMS, type TestHost } from '../../support/host-harness.ts';
import {
  attachmentItem,
  claimItem,
  consumerSpec,
  createConsumer,
  createQueue,
  createWorker,
  expectProblem,
  getOperation,
  getResource,
  SPACE,
  sideEffectProbe,
  tableSnapshot,
  update,
} from './consumer-support.ts';

/**
 * QueueConsumer 0.3.0 input validation (QC-01, QC-02): the spec is closed and exact, every
 * integer is required and range-checked, reference objects hold exactly one grammatical
 * `resourceUid`. Each refusal is a Problem before acceptance, with no trace anywhere.
 */

interface Uids {
  q: string;
  w: string;
  d: string;
}

interface Case {
  req: string;
  label: string;
  /** The spec to send, built from the uids of live, valid targets. */
  spec: (u: Uids) => unknown;
  /** Extra envelope fields (privateInputs). */
  envelope?: Record<string, unknown>;
  status: number;
  code: string;
}

const INTEGER_FIELDS = [
  'maxBatchSize',
  'maxBatchTimeoutSeconds',
  'maxConcurrency',
  'maxRetries',
  'retryDelaySeconds',
] as const;
const REQUIRED_FIELDS = ['queue', 'worker', ...INTEGER_FIELDS] as const;
const REF_FIELDS = ['queue', 'worker', 'deadLetterQueue'] as const;
const BOUNDS: Record<(typeof INTEGER_FIELDS)[number], [number, number]> = {
  maxBatchSize: [1, 100],
  maxBatchTimeoutSeconds: [0, 60],
  maxConcurrency: [1, 250],
  maxRetries: [0, 100],
  retryDelaySeconds: [0, 43_200],
};

const valid = (u: Uids, extra: Record<string, unknown> = {}) =>
  consumerSpec(u.q, u.w, { deadLetterQueue: { resourceUid: u.d }, ...extra });
const without = (u: Uids, field: string) => {
  const spec: Record<string, unknown> = valid(u);
  delete spec[field];
  return spec;
};
/** The uid a valid spec puts in reference field `f`. */
const refOf = (u: Uids, f: (typeof REF_FIELDS)[number]) =>
  ({ queue: u.q, worker: u.w, deadLetterQueue: u.d })[f];
const invalid = (req: string, label: string, spec: (u: Uids) => unknown): Case => ({
  req,
  label,
  spec,
  status: 422,
  code: 'invalid_spec',
});

const CASES: Case[] = [
  // Every required field missing, one at a time.
  ...REQUIRED_FIELDS.map((f) => invalid('QC-01', `a spec without ${f}`, (u) => without(u, f))),
  invalid('QC-01', 'an empty spec', () => ({})),
  // JSON types that are not integers, for every integer field.
  ...INTEGER_FIELDS.flatMap((f) =>
    (['10', 2.5, null, true, [10], { value: 10 }] as unknown[]).map((bad) =>
      invalid('QC-01', `${f} = ${JSON.stringify(bad)}`, (u) => valid(u, { [f]: bad })),
    ),
  ),
  // Each bound, one step outside.
  ...INTEGER_FIELDS.flatMap((f) => {
    const [min, max] = BOUNDS[f];
    return [min - 1, max + 1].map((bad) => invalid('QC-01', `${f} = ${bad}`, (u) => valid(u, { [f]: bad })));
  }),
  invalid('QC-01', `maxBatchSize = -100 (far outside)`, (u) => valid(u, { maxBatchSize: -100 })),
  // Unknown fields at the top level and inside each reference object.
  invalid('QC-01', 'an unknown top-level field', (u) => valid(u, { takoformUnexpected: true })),
  invalid('QC-01', 'an unknown top-level field whose value is null', (u) => valid(u, { batchWindow: null })),
  invalid('QC-01', 'a misspelt field (maxBatchsize) beside the right one', (u) =>
    valid(u, { maxBatchsize: 10 }),
  ),
  invalid('QC-02', 'privateInputs smuggled inside spec', (u) => valid(u, { privateInputs: { token: 'x' } })),
  ...REF_FIELDS.map((f) =>
    invalid('QC-01', `an unknown field inside ${f}`, (u) => {
      return valid(u, { [f]: { resourceUid: refOf(u, f), name: 'extra' } });
    }),
  ),
  // Reference objects of the wrong shape.
  ...REF_FIELDS.flatMap((f) => [
    invalid('QC-01', `${f} as a bare uid string`, (u) => valid(u, { [f]: refOf(u, f) })),
    invalid('QC-01', `${f} as an array`, (u) => valid(u, { [f]: [{ resourceUid: refOf(u, f) }] })),
    invalid('QC-01', `${f} without resourceUid`, (u) => valid(u, { [f]: {} })),
    invalid('QC-01', `${f} = null`, (u) => valid(u, { [f]: null })),
    invalid('QC-01', `${f}.resourceUid as a number`, (u) => valid(u, { [f]: { resourceUid: 42 } })),
    invalid('QC-01', `${f}.resourceUid = null`, (u) => valid(u, { [f]: { resourceUid: null } })),
  ]),
  // Reference uids outside the id grammar [A-Za-z0-9][A-Za-z0-9._-]{0,127}.
  ...['', '-leading-dash', 'has space', 'a/b', 'ü-nicode', 'x'.repeat(129)].map((uid) =>
    invalid(
      'QC-01',
      `queue.resourceUid ${JSON.stringify(uid.length > 20 ? `${uid.length} chars` : uid)}`,
      (u) => valid(u, { queue: { resourceUid: uid } }),
    ),
  ),
  invalid('QC-01', 'worker.resourceUid "."', (u) => valid(u, { worker: { resourceUid: '.' } })),
  invalid('QC-01', 'deadLetterQueue.resourceUid "_x"', (u) =>
    valid(u, { deadLetterQueue: { resourceUid: '_x' } }),
  ),
  // deadLetterQueue equal to the consumer's own queue (host-profile §4: a shape error, 422).
  invalid('QC-06', 'deadLetterQueue equal to queue', (u) =>
    valid(u, { deadLetterQueue: { resourceUid: u.q } }),
  ),
  // spec itself not an object (host-profile §4: a type error in spec).
  ...([null, [], 'spec', 7] as unknown[]).map((bad) =>
    invalid('QC-01', `spec = ${JSON.stringify(bad)}`, () => bad),
  ),
  // QC-02: this Host advertises capabilities.privateInputs:false and Support.privateInputs:false,
  // so host-api-v2 §7.1/§10 answer ANY privateInputs (even {}) with 422 capability_required, and the
  // capability check comes before spec validation (§13 check order, step 10 before step 16).
  // host-profile §4's `invalid_spec` for a non-empty map is the Form-level answer a Host offering the
  // capability would give; here the request never reaches the Form. Both are 422 refusals.
  {
    req: 'QC-02',
    label: 'a non-empty privateInputs map',
    spec: (u) => valid(u),
    envelope: { privateInputs: { token: 'secret-value' } },
    status: 422,
    code: 'capability_required',
  },
  {
    req: 'QC-02',
    label: 'an empty privateInputs map',
    spec: (u) => valid(u),
    envelope: { privateInputs: {} },
    status: 422,
    code: 'capability_required',
  },
];

describe('QueueConsumer 0.3.0 spec validation', () => {
  let host: TestHost;
  const u: Uids = { q: '', w: '', d: '' };

  beforeAll(async () => {
    host = await createTestHost();
    u.q = await createQueue(host, 'orders');
    u.d = await createQueue(host, 'orders-dead');
    u.w = await createWorker(host, 'handler');
    await host.settle();
  });

  it('QC-01 the table holds at least 40 distinct invalid specs', () => {
    expect(CASES.length).toBeGreaterThanOrEqual(40);
    expect(new Set(CASES.map((c) => c.label)).size).toBe(CASES.length);
  });

  CASES.forEach((c, i) => {
    it(`${c.req} refuses ${c.label} with ${c.status} ${c.code} and no side effect`, async () => {
      const name = `bad-${i}`;
      const key = host.newKey();
      const check = await sideEffectProbe(host, { name, key, queues: [u.q, u.d] });
      const res = await host.request({
        method: 'POST',
        path: '/resources',
        headers: { 'idempotency-key': key },
        body: { form: FORMS.consumer, space: SPACE, name, spec: c.spec(u), ...c.envelope },
      });
      expectProblem(res, c.status, c.code);
      // A refusal never echoes a private value.
      expect(JSON.stringify(res.body)).not.toContain('secret-value');
      await check();
    });
  });

  it('QC-01 QC-02 no refused name was reserved: a valid consumer of each name is then accepted', async () => {
    const before = await host.request({ path: '/resources', query: `space=${SPACE}` });
    expect(before.body.items.map((r: { name: string }) => r.name).sort()).toEqual([
      'handler',
      'orders',
      'orders-dead',
    ]);
    for (let i = 0; i < CASES.length; i++) {
      const queue = await createQueue(host, `fresh-${i}`);
      const res = await createConsumer(host, `bad-${i}`, consumerSpec(queue, u.w));
      expect(res.status, `bad-${i}: ${JSON.stringify(res.body)}`).toBe(202);
    }
  });

  it('QC-01 QC-07 the same refusals on update leave the consumer exactly as it was', async () => {
    const fresh = await createTestHost();
    const v: Uids = {
      q: await createQueue(fresh, 'orders'),
      d: await createQueue(fresh, 'orders-dead'),
      w: await createWorker(fresh, 'handler'),
    };
    const created = await createConsumer(fresh, 'consumer', valid(v));
    expect(created.status).toBe(202);
    const uid = created.body.resourceUid as string;
    await fresh.settle();
    const resource = (await getResource(fresh, uid)).body;
    expect(resource).toMatchObject({ generation: 1, phase: 'idle' });
    const table = await tableSnapshot(fresh);
    for (const c of CASES) {
      const res = await fresh.request({
        method: 'PUT',
        path: `/resources/${uid}`,
        headers: { 'idempotency-key': fresh.newKey(), 'takoform-expected-generation': '1' },
        body: { spec: c.spec(v), ...c.envelope },
      });
      expectProblem(res, c.status, c.code);
    }
    expect(await tableSnapshot(fresh)).toEqual(table);
    expect((await getResource(fresh, uid)).body).toEqual(resource);
    expect(fresh.accepted).toHaveLength(4);
  });
});

describe('QueueConsumer 0.3.0 exact bounds', () => {
  let host: TestHost;
  let worker: string;
  beforeAll(async () => {
    host = await createTestHost();
    worker = await createWorker(host, 'handler');
  });

  it('QC-01 accepts every integer field at both ends of its range, stored and attached exactly', async () => {
    const made: { uid: string; op: string; spec: ReturnType<typeof consumerSpec>; field: string }[] = [];
    for (const f of INTEGER_FIELDS) {
      for (const value of BOUNDS[f]) {
        const queue = await createQueue(host, `q-${f}-${value}`);
        const spec = consumerSpec(queue, worker, { [f]: value });
        const res = await createConsumer(host, `c-${f}-${value}`, spec);
        expect(res.status, `${f}=${value}: ${JSON.stringify(res.body)}`).toBe(202);
        made.push({ uid: res.body.resourceUid, op: res.body.id, spec, field: f });
      }
    }
    // All five at their minimum and all five at their maximum together, with a dead-letter queue.
    for (const end of [0, 1] as const) {
      const queue = await createQueue(host, `q-all-${end}`);
      const dlq = await createQueue(host, `q-all-${end}-dead`);
      const ends = Object.fromEntries(INTEGER_FIELDS.map((f) => [f, BOUNDS[f][end]]));
      const spec = consumerSpec(queue, worker, { ...ends, deadLetterQueue: { resourceUid: dlq } });
      const res = await createConsumer(host, `c-all-${end}`, spec);
      expect(res.status, JSON.stringify(res.body)).toBe(202);
      made.push({ uid: res.body.resourceUid, op: res.body.id, spec, field: 'all' });
    }
    await host.settle();
    for (const m of made) {
      expect((await getOperation(host, m.op)).body, m.uid).toMatchObject({ status: 'succeeded' });
      const r = await getResource(host, m.uid);
      expect(r.body.spec).toEqual(m.spec);
      expect(r.body.phase).toBe('idle');
      const attached = await attachmentItem(host, m.uid);
      expect(JSON.parse(attached?.specJson)).toEqual(m.spec);
      expect((await claimItem(host, m.spec.queue.resourceUid))?.owner).toBe(m.uid);
    }
  });

  it('QC-01 a JSON number written 10.0 is the integer 10 (host-profile §5)', async () => {
    const queue = await createQueue(host, 'q-decimal');
    const raw =
      `{"form":${JSON.stringify(FORMS.consumer)},"space":"${SPACE}","name":"c-decimal","spec":{` +
      `"queue":{"resourceUid":"${queue}"},"worker":{"resourceUid":"${worker}"},` +
      `"maxBatchSize":10.0,"maxBatchTimeoutSeconds":5.00,"maxConcurrency":4.0,"maxRetries":0.0,` +
      `"retryDelaySeconds":30.0}}`;
    const res = await host.request({
      method: 'POST',
      path: '/resources',
      rawBody: raw,
      headers: { 'idempotency-key': host.newKey(), 'content-type': 'application/json' },
    });
    expect(res.status, JSON.stringify(res.body)).toBe(202);
    const stored = (await getResource(host, res.body.resourceUid)).body.spec;
    expect(stored).toEqual(consumerSpec(queue, worker, { maxRetries: 0 }));
    expect(Object.is(stored.maxRetries, 0)).toBe(true);

    // 10.5 written the same way is still refused.
    const half = await host.request({
      method: 'POST',
      path: '/resources',
      rawBody: raw.replace('"maxBatchSize":10.0', '"maxBatchSize":10.5').replace('c-decimal', 'c-half'),
      headers: { 'idempotency-key': host.newKey(), 'content-type': 'application/json' },
    });
    expectProblem(half, 422, 'invalid_spec');
  });

  it('QC-01 an update may move every updatable field to its other bound', async () => {
    const queue = await createQueue(host, 'q-walk');
    const mins = Object.fromEntries(INTEGER_FIELDS.map((f) => [f, BOUNDS[f][0]]));
    const maxs = Object.fromEntries(INTEGER_FIELDS.map((f) => [f, BOUNDS[f][1]]));
    const res = await createConsumer(host, 'c-walk', consumerSpec(queue, worker, mins));
    expect(res.status).toBe(202);
    const uid = res.body.resourceUid;
    await host.settle();
    const up = await update(host, uid, 1, consumerSpec(queue, worker, maxs));
    expect(up.status, JSON.stringify(up.body)).toBe(202);
    await host.settle();
    expect((await getResource(host, uid)).body).toMatchObject({
      generation: 2,
      observedGeneration: 2,
      spec: consumerSpec(queue, worker, maxs),
    });
    expect(await attachmentItem(host, uid)).toMatchObject({ generation: 2 });
  });
});
