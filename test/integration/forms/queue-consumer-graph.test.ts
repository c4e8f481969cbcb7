import { beforeAll, describe, expect, it } from 'vitest';
import { createTestHost, FORMS, type TestHost } from '../../support/host-harness.ts';
import {
  acceptedConsumer,
  attachmentItem,
  claimItem,
  consumerSpec,
  createConsumer,
  createQueue,
  createWorker,
  expectProblem,
  getResource,
  graphVersion,
  removeAndSettle,
  sideEffectProbe,
  tableSnapshot,
  update,
} from './consumer-support.ts';

/**
 * Cross-consumer rules of QueueConsumer 0.3.0: one live consumer per queue (QC-05) and an acyclic
 * dead-letter graph over all consumers (QC-06), both also under concurrent writes.
 */
describe('QueueConsumer 0.3.0 consumer exclusivity and the dead-letter graph', () => {
  let host: TestHost;
  let worker: string;
  let counter = 0;
  const fresh = (prefix: string) => `${prefix}-${++counter}`;
  const queues = (n: number) => Promise.all(Array.from({ length: n }, () => createQueue(host, fresh('q'))));
  const dlq = (uid: string) => ({ deadLetterQueue: { resourceUid: uid } });

  beforeAll(async () => {
    host = await createTestHost();
    worker = await createWorker(host, 'handler');
    await host.settle();
  });

  /** The dead-letter edges as the claims record them: queue -> deadLetterQueue. */
  async function edges(qs: string[]): Promise<Map<string, string>> {
    const out = new Map<string, string>();
    for (const q of qs) {
      const claim = await claimItem(host, q);
      const to = claim?.attributes?.deadLetterQueue;
      if (typeof to === 'string') out.set(q, to);
    }
    return out;
  }

  function hasCycle(graph: Map<string, string>): boolean {
    for (const start of graph.keys()) {
      let at: string | undefined = graph.get(start);
      for (let hops = 0; at !== undefined && hops <= graph.size; hops++) {
        if (at === start) return true;
        at = graph.get(at);
      }
    }
    return false;
  }

  it('QC-05 refuses a second consumer on a queue, with no side effect', async () => {
    const [q] = await queues(1);
    const first = await acceptedConsumer(host, fresh('c'), consumerSpec(q!, worker));
    await host.settle();
    for (const extra of [{}, { maxBatchSize: 1 }]) {
      const name = fresh('second');
      const key = host.newKey();
      const check = await sideEffectProbe(host, { name, key, queues: [q!] });
      const res = await createConsumer(host, name, consumerSpec(q!, worker, extra), { key });
      expectProblem(res, 409, 'dependency_conflict');
      expect(res.body.detail).toMatch(/^the queue already has a consumer; delete that consumer first/);
      await check();
    }
    expect((await claimItem(host, q!))?.owner).toBe(first);
  });

  it('QC-05 a queue used only as a dead-letter queue can still get its own consumer', async () => {
    const [a, b] = await queues(2);
    await acceptedConsumer(host, fresh('c'), consumerSpec(a!, worker, dlq(b!)));
    const own = await createConsumer(host, fresh('c'), consumerSpec(b!, worker));
    expect(own.status, JSON.stringify(own.body)).toBe(202);
    await host.settle();
  });

  it('QC-05 the second consumer is refused while the first is deleting and accepted once it is gone', async () => {
    const [q] = await queues(1);
    const first = await acceptedConsumer(host, fresh('c'), consumerSpec(q!, worker));
    await host.settle();
    const del = await host.request({
      method: 'DELETE',
      path: `/resources/${first}`,
      headers: { 'idempotency-key': host.newKey(), 'takoform-expected-generation': '1' },
    });
    expect(del.status).toBe(202);
    // Deleting, not yet detached: still the queue's consumer.
    expectProblem(
      await createConsumer(host, fresh('c'), consumerSpec(q!, worker)),
      409,
      'dependency_conflict',
    );
    await host.settle();
    expect([404, 410]).toContain((await getResource(host, first)).status);
    expect(await claimItem(host, q!)).toBeUndefined();
    const again = await createConsumer(host, fresh('c'), consumerSpec(q!, worker));
    expect(again.status, JSON.stringify(again.body)).toBe(202);
    expect((await claimItem(host, q!))?.owner).toBe(again.body.resourceUid);
    await host.settle();
    expect((await attachmentItem(host, again.body.resourceUid))?.state).toBe('active');
  });

  it('QC-05 ten concurrent creates of consumers on one queue: exactly one is accepted', async () => {
    for (let round = 0; round < 3; round++) {
      const [q] = await queues(1);
      const before = host.accepted.length;
      const results = await Promise.all(
        Array.from({ length: 10 }, (_, i) =>
          createConsumer(host, fresh(`race-${i}`), consumerSpec(q!, worker, { maxConcurrency: i + 1 })),
        ),
      );
      const won = results.filter((r) => r.status === 202);
      const lost = results.filter((r) => r.status !== 202);
      expect(won, JSON.stringify(results.map((r) => [r.status, r.body.code]))).toHaveLength(1);
      for (const r of lost) expectProblem(r, 409, 'dependency_conflict');
      expect(host.accepted.length - before).toBe(1);
      expect((await claimItem(host, q!))?.owner).toBe(won[0]!.body.resourceUid);
      // Only the winner exists.
      const list = await host.request({
        path: '/resources',
        query: `form=${encodeURIComponent(FORMS.consumer)}`,
      });
      const items = list.body.items as { uid: string; spec: { queue: { resourceUid: string } } }[];
      const onQ = items.filter((r) => r.spec.queue.resourceUid === q);
      expect(onQ.map((r) => r.uid)).toEqual([won[0]!.body.resourceUid]);
    }
    await host.settle();
  });

  it('QC-06 refuses a dead-letter queue equal to the consumer’s own queue (A→A) with 422', async () => {
    const [a] = await queues(1);
    const name = fresh('self');
    const key = host.newKey();
    const check = await sideEffectProbe(host, { name, key, queues: [a!] });
    expectProblem(
      await createConsumer(host, name, consumerSpec(a!, worker, dlq(a!)), { key }),
      422,
      'invalid_spec',
    );
    await check();
  });

  it('QC-06 refuses the two-cycle A→B→A with 409 and no side effect', async () => {
    const [a, b] = await queues(2);
    await acceptedConsumer(host, fresh('c'), consumerSpec(a!, worker, dlq(b!)));
    const name = fresh('close');
    const key = host.newKey();
    const check = await sideEffectProbe(host, { name, key, queues: [a!, b!] });
    const res = await createConsumer(host, name, consumerSpec(b!, worker, dlq(a!)), { key });
    expectProblem(res, 409, 'dependency_conflict');
    expect(res.body.detail).toMatch(/^deadLetterQueue would send messages in a loop/);
    await check();
    await host.settle();
  });

  it('QC-06 refuses the three-cycle A→B→C→A, whichever edge closes it', async () => {
    // Closed by the last edge in chain order...
    const [a, b, c] = await queues(3);
    await acceptedConsumer(host, fresh('c'), consumerSpec(a!, worker, dlq(b!)));
    await acceptedConsumer(host, fresh('c'), consumerSpec(b!, worker, dlq(c!)));
    const name = fresh('close');
    const key = host.newKey();
    const check = await sideEffectProbe(host, { name, key, queues: [a!, b!, c!] });
    expectProblem(
      await createConsumer(host, name, consumerSpec(c!, worker, dlq(a!)), { key }),
      409,
      'dependency_conflict',
    );
    await check();
    // ...and by the middle edge, written last.
    const [x, y, z] = await queues(3);
    await acceptedConsumer(host, fresh('c'), consumerSpec(x!, worker, dlq(y!)));
    await acceptedConsumer(host, fresh('c'), consumerSpec(z!, worker, dlq(x!)));
    expectProblem(
      await createConsumer(host, fresh('c'), consumerSpec(y!, worker, dlq(z!))),
      409,
      'dependency_conflict',
    );
    expect(hasCycle(await edges([a!, b!, c!, x!, y!, z!]))).toBe(false);
    await host.settle();
  });

  it('QC-06 accepts a long chain A→B→C→D→E, refuses the edge E→A that would close it', async () => {
    const qs = await queues(5);
    const made: string[] = [];
    // Written from the tail so that every step extends an existing chain at its head.
    for (let i = qs.length - 2; i >= 0; i--) {
      made.push(await acceptedConsumer(host, fresh('chain'), consumerSpec(qs[i]!, worker, dlq(qs[i + 1]!))));
    }
    await host.settle();
    for (const uid of made) expect((await getResource(host, uid)).body.phase).toBe('idle');
    expect([...(await edges(qs)).entries()]).toHaveLength(4);
    expectProblem(
      await createConsumer(host, fresh('close'), consumerSpec(qs[4]!, worker, dlq(qs[0]!))),
      409,
      'dependency_conflict',
    );
    expectProblem(
      await createConsumer(host, fresh('close'), consumerSpec(qs[4]!, worker, dlq(qs[2]!))),
      409,
      'dependency_conflict',
    );
    // E may still get a consumer without a dead-letter queue, or one draining to a fresh queue.
    const [f] = await queues(1);
    const tail = await createConsumer(host, fresh('chain'), consumerSpec(qs[4]!, worker, dlq(f!)));
    expect(tail.status, JSON.stringify(tail.body)).toBe(202);
    expect(hasCycle(await edges([...qs, f!]))).toBe(false);
    await host.settle();
  });

  it('QC-06 accepts a diamond (A→C and B→C, then C→D)', async () => {
    const [a, b, c, d] = await queues(4);
    await acceptedConsumer(host, fresh('c'), consumerSpec(a!, worker, dlq(c!)));
    await acceptedConsumer(host, fresh('c'), consumerSpec(b!, worker, dlq(c!)));
    await acceptedConsumer(host, fresh('c'), consumerSpec(c!, worker, dlq(d!)));
    // D→A would close A→C→D→A; D→B likewise.
    expectProblem(
      await createConsumer(host, fresh('c'), consumerSpec(d!, worker, dlq(a!))),
      409,
      'dependency_conflict',
    );
    expectProblem(
      await createConsumer(host, fresh('c'), consumerSpec(d!, worker, dlq(b!))),
      409,
      'dependency_conflict',
    );
    await host.settle();
  });

  it('QC-06 concurrent writes that together would close a cycle are never both accepted', async () => {
    for (let round = 0; round < 10; round++) {
      const [q1, q2] = await queues(2);
      const results = await Promise.all([
        createConsumer(host, fresh('pair'), consumerSpec(q1!, worker, dlq(q2!))),
        createConsumer(host, fresh('pair'), consumerSpec(q2!, worker, dlq(q1!))),
      ]);
      const codes = results.map((r) => [r.status, r.body.code]);
      // Each alone is fine; together they are a cycle: exactly one may win.
      expect(
        results.filter((r) => r.status === 202),
        JSON.stringify(codes),
      ).toHaveLength(1);
      for (const r of results.filter((x) => x.status !== 202)) expectProblem(r, 409, 'dependency_conflict');
      expect(hasCycle(await edges([q1!, q2!]))).toBe(false);
    }
    // A three-queue ring written concurrently, each edge alone harmless.
    for (let round = 0; round < 4; round++) {
      const ring = await queues(3);
      const results = await Promise.all(
        ring.map((q, i) =>
          createConsumer(host, fresh('ring'), consumerSpec(q, worker, dlq(ring[(i + 1) % 3]!))),
        ),
      );
      const won = results.filter((r) => r.status === 202).length;
      expect(won, JSON.stringify(results.map((r) => [r.status, r.body.code]))).toBe(2);
      expect(hasCycle(await edges(ring))).toBe(false);
    }
    await host.settle();
  });

  it('QC-06 QC-07 an update that would close a cycle is refused and leaves everything unchanged', async () => {
    const [a, b, c] = await queues(3);
    await acceptedConsumer(host, fresh('c'), consumerSpec(a!, worker, dlq(b!)));
    const onB = await acceptedConsumer(host, fresh('c'), consumerSpec(b!, worker));
    const onC = await acceptedConsumer(host, fresh('c'), consumerSpec(c!, worker, dlq(b!)));
    await host.settle();
    const resource = (await getResource(host, onB)).body;
    const attached = await attachmentItem(host, onB);
    const version = await graphVersion(host);
    const table = await tableSnapshot(host);

    // B→A closes A→B→A; B→C closes B→C→B.
    for (const to of [a!, c!]) {
      const res = await update(host, onB, 1, consumerSpec(b!, worker, dlq(to)));
      expectProblem(res, 409, 'dependency_conflict');
    }
    expect(await tableSnapshot(host)).toEqual(table);
    expect((await getResource(host, onB)).body).toEqual(resource);
    expect(await attachmentItem(host, onB)).toEqual(attached);
    expect(await graphVersion(host)).toBe(version);

    // Redirecting C away from B and then B→C is fine: the cycle check follows the current edges.
    const [d] = await queues(1);
    expect((await update(host, onC, 1, consumerSpec(c!, worker, dlq(d!)))).status).toBe(202);
    await host.settle();
    const ok = await update(host, onB, 1, consumerSpec(b!, worker, dlq(c!)));
    expect(ok.status, JSON.stringify(ok.body)).toBe(202);
    await host.settle();
    expect((await getResource(host, onB)).body).toMatchObject({
      generation: 2,
      spec: { deadLetterQueue: { resourceUid: c } },
    });
    expect(hasCycle(await edges([a!, b!, c!, d!]))).toBe(false);
  });

  it('QC-06 removing a dead-letter edge (update or delete) lets the reverse edge in', async () => {
    const [a, b] = await queues(2);
    const onA = await acceptedConsumer(host, fresh('c'), consumerSpec(a!, worker, dlq(b!)));
    await host.settle();
    expectProblem(
      await createConsumer(host, fresh('c'), consumerSpec(b!, worker, dlq(a!))),
      409,
      'dependency_conflict',
    );
    // Update A's consumer to drop its dead-letter queue: B→A is then acyclic.
    expect((await update(host, onA, 1, consumerSpec(a!, worker))).status).toBe(202);
    await host.settle();
    const onB = await createConsumer(host, fresh('c'), consumerSpec(b!, worker, dlq(a!)));
    expect(onB.status, JSON.stringify(onB.body)).toBe(202);
    await host.settle();
    // Delete path: A→B is now refused; after B's consumer is deleted it is accepted.
    expectProblem(await update(host, onA, 2, consumerSpec(a!, worker, dlq(b!))), 409, 'dependency_conflict');
    await removeAndSettle(host, onB.body.resourceUid);
    const back = await update(host, onA, 2, consumerSpec(a!, worker, dlq(b!)));
    expect(back.status, JSON.stringify(back.body)).toBe(202);
    await host.settle();
  });
});
