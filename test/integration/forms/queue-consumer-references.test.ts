import { beforeAll, describe, expect, it } from 'vitest';
import { createTestHost, type TestHost, type TestPrincipal } from '../../support/host-harness.ts';
import {
  acceptedConsumer,
  claimItem,
  consumerSpec,
  createConsumer,
  createQueue,
  createWorker,
  expectProblem,
  getResource,
  remove,
  removeAndSettle,
  SPACE,
  sideEffectProbe,
  tableSnapshot,
  update,
} from './consumer-support.ts';

/**
 * QueueConsumer 0.3.0 references (QC-03, QC-04): each target is a live Resource of the exact Form
 * in the same Space (and, on this Host, of the same principal), and the Worker declares `queue`.
 * Every violation is `409 dependency_conflict` before acceptance, with no trace anywhere.
 */
describe('QueueConsumer 0.3.0 references', () => {
  let host: TestHost;
  let bob: TestPrincipal;
  let queue: string;
  let dead: string;
  let worker: string;

  beforeAll(async () => {
    host = await createTestHost();
    bob = host.principals.bob as TestPrincipal;
    queue = await createQueue(host, 'orders');
    dead = await createQueue(host, 'orders-dead');
    worker = await createWorker(host, 'handler');
    await host.settle();
  });

  /** Sends the create and proves it was refused with 409 dependency_conflict and left nothing. */
  async function refused(
    name: string,
    spec: unknown,
    watch: string[],
    as?: TestPrincipal,
    space = SPACE,
  ): Promise<void> {
    const key = host.newKey();
    const check = await sideEffectProbe(host, { name, key, queues: watch, as, space });
    const res = await createConsumer(host, name, spec, { as, key, space });
    expectProblem(res, 409, 'dependency_conflict');
    // Includes the targets' `inboundRefs` counters: the whole table is unchanged.
    await check();
  }

  const missing = 'r0000000000MISSING0000000000';

  it('QC-03 refuses a queue uid that names no Resource', async () => {
    await refused('c-missing-queue', consumerSpec(missing, worker), [missing]);
  });

  it('QC-03 refuses a worker uid that names no Resource', async () => {
    await refused('c-missing-worker', consumerSpec(queue, missing), [queue]);
  });

  it('QC-03 refuses a deadLetterQueue uid that names no Resource', async () => {
    await refused(
      'c-missing-dlq',
      consumerSpec(queue, worker, { deadLetterQueue: { resourceUid: missing } }),
      [queue, missing],
    );
  });

  it('QC-03 refuses a queue, dead-letter queue or worker that was deleted', async () => {
    const gone = await createQueue(host, 'gone-queue');
    const goneWorker = await createWorker(host, 'gone-worker');
    await host.settle();
    await removeAndSettle(host, gone);
    await removeAndSettle(host, goneWorker);
    expect([404, 410]).toContain((await getResource(host, gone)).status);
    await refused('c-deleted-queue', consumerSpec(gone, worker), [gone]);
    await refused('c-deleted-dlq', consumerSpec(queue, worker, { deadLetterQueue: { resourceUid: gone } }), [
      queue,
      gone,
    ]);
    // The fake code is still registered: only the deleted Resource makes it refused.
    await refused('c-deleted-worker', consumerSpec(queue, goneWorker), [queue]);
  });

  it('QC-03 refuses a queue or worker whose delete is running (phase deleting)', async () => {
    const dying = await createQueue(host, 'dying-queue');
    const dyingWorker = await createWorker(host, 'dying-worker');
    await host.settle();
    const del = await remove(host, dying, 1);
    const delWorker = await remove(host, dyingWorker, 1);
    expect([del.status, delWorker.status]).toEqual([202, 202]);
    // Not settled: both deletes are accepted and unfinished.
    expect((await getResource(host, dying)).body.phase).toBe('deleting');
    expect((await getResource(host, dyingWorker)).body.phase).toBe('deleting');
    await refused('c-dying-queue', consumerSpec(dying, worker), [dying]);
    await refused('c-dying-dlq', consumerSpec(queue, worker, { deadLetterQueue: { resourceUid: dying } }), [
      queue,
      dying,
    ]);
    await refused('c-dying-worker', consumerSpec(queue, dyingWorker), [queue]);
    await host.settle();
    expect([404, 410]).toContain((await getResource(host, dying)).status);
  });

  it('QC-03 refuses targets in another Space, even of the same principal', async () => {
    // bob writes to both `team` and `other`: his queue and worker in `other` are not usable from `team`.
    const otherQueue = await createQueue(host, 'bob-other-queue', bob, 'other');
    const otherWorker = await createWorker(host, 'bob-other-worker', ['queue'], bob, 'other');
    const bobQueue = await createQueue(host, 'bob-queue', bob);
    const bobWorker = await createWorker(host, 'bob-worker', ['queue'], bob);
    await host.settle();
    // Sanity: with same-Space targets bob's consumer would be accepted (checked last below).
    await refused('c-bob-other-queue', consumerSpec(otherQueue, bobWorker), [otherQueue, bobQueue], bob);
    await refused('c-bob-other-worker', consumerSpec(bobQueue, otherWorker), [bobQueue], bob);
    await refused(
      'c-bob-other-dlq',
      consumerSpec(bobQueue, bobWorker, { deadLetterQueue: { resourceUid: otherQueue } }),
      [bobQueue, otherQueue],
      bob,
    );
    // And a consumer in `other` cannot reach into `team`.
    await refused('c-bob-into-team', consumerSpec(bobQueue, otherWorker), [bobQueue], bob, 'other');
    await refused('c-bob-into-team-2', consumerSpec(otherQueue, bobWorker), [otherQueue], bob, 'other');
    const ok = await createConsumer(host, 'c-bob-ok', consumerSpec(bobQueue, bobWorker), { as: bob });
    expect(ok.status, JSON.stringify(ok.body)).toBe(202);
  });

  it('QC-03 refuses another principal’s queue, dead-letter queue or worker in the same Space', async () => {
    const bobQueue = await createQueue(host, 'bob-team-queue', bob);
    const bobDead = await createQueue(host, 'bob-team-dead', bob);
    const bobWorker = await createWorker(host, 'bob-team-worker', ['queue'], bob);
    await host.settle();
    // A reference grants no authority (QC-03): alice cannot attach to bob's Resources...
    await refused('c-alice-bob-queue', consumerSpec(bobQueue, worker), [bobQueue]);
    await refused('c-alice-bob-worker', consumerSpec(queue, bobWorker), [queue]);
    await refused(
      'c-alice-bob-dlq',
      consumerSpec(queue, worker, { deadLetterQueue: { resourceUid: bobDead } }),
      [queue, bobDead],
    );
    // ...nor bob to alice's.
    await refused('c-bob-alice-queue', consumerSpec(queue, bobWorker), [queue], bob);
    await refused('c-bob-alice-worker', consumerSpec(bobQueue, worker), [bobQueue], bob);
  });

  it('QC-03 refuses a target of the wrong Form in every reference role', async () => {
    const other = await createWorker(host, 'plain-worker');
    const existing = await acceptedConsumer(host, 'c-existing', consumerSpec(dead, worker));
    await host.settle();
    await refused('c-worker-as-queue', consumerSpec(other, worker), [other]);
    await refused('c-queue-as-worker', consumerSpec(queue, dead), [queue, dead]);
    await refused(
      'c-worker-as-dlq',
      consumerSpec(queue, worker, { deadLetterQueue: { resourceUid: other } }),
      [queue, other],
    );
    await refused(
      'c-consumer-as-dlq',
      consumerSpec(queue, worker, { deadLetterQueue: { resourceUid: existing } }),
      [queue],
    );
    await refused('c-consumer-as-queue', consumerSpec(existing, worker), [existing]);
    await refused('c-consumer-as-worker', consumerSpec(queue, existing), [queue]);
    await removeAndSettle(host, existing);
  });

  it('QC-04 refuses a worker whose code does not declare a queue handler', async () => {
    const fetchOnly = await createWorker(host, 'w', ['fetch']);
    const twoOthers = await createWorker(host, 'w2', ['fetch', 'scheduled']);
    const noHandlers = await createWorker(host, 'w3', []);
    await host.settle();
    await refused('c-fetch-only', consumerSpec(queue, fetchOnly), [queue]);
    const res = await createConsumer(host, 'c-fetch-only', consumerSpec(queue, fetchOnly));
    expect(res.body.detail).toMatch(
      /^the worker has no queue handler: its module must export queue\(batch, env, ctx\)/,
    );
    await refused('c-fetch-scheduled', consumerSpec(queue, twoOthers), [queue]);
    await refused('c-no-handlers', consumerSpec(queue, noHandlers), [queue]);
  });

  it('QC-04 refuses a worker Resource with no code at all, and accepts it once code declares queue', async () => {
    const bare = await createWorker(host, 'no-code', null);
    await host.settle();
    expect((await getResource(host, bare)).body.observed).toEqual({
      activeDeploymentUid: null,
      ready: false,
    });
    await refused('c-no-code', consumerSpec(queue, bare), [queue]);
    // The refusal is about the code, not the Resource: with code declaring `queue` it is accepted.
    host.workers.set(SPACE, 'no-code', ['fetch', 'queue']);
    const ok = await createConsumer(host, 'c-no-code', consumerSpec(queue, bare));
    expect(ok.status, JSON.stringify(ok.body)).toBe(202);
    expect((await claimItem(host, queue))?.owner).toBe(ok.body.resourceUid);
    await host.settle();
    await removeAndSettle(host, ok.body.resourceUid);
  });

  it('QC-03 a refused create with a good queue and a bad dead-letter queue takes no reference on the queue', async () => {
    // The good target is still deletable afterwards: nothing holds it.
    const spare = await createQueue(host, 'spare');
    await host.settle();
    await refused('c-spare', consumerSpec(spare, worker, { deadLetterQueue: { resourceUid: missing } }), [
      spare,
    ]);
    await removeAndSettle(host, spare);
  });

  it('QC-03 QC-04 an update re-checks references and the queue handler, and a refusal changes nothing', async () => {
    const q = await createQueue(host, 'upd-queue');
    const w = await createWorker(host, 'upd-worker');
    const gone = await createQueue(host, 'upd-gone');
    const dying = await createQueue(host, 'upd-dying');
    const bobQueue = await createQueue(host, 'upd-bob-queue', bob);
    await host.settle();
    const uid = await acceptedConsumer(host, 'c-upd', consumerSpec(q, w));
    await host.settle();
    await removeAndSettle(host, gone);
    expect((await remove(host, dying, 1)).status).toBe(202);
    const before = (await getResource(host, uid)).body;
    const table = await tableSnapshot(host);
    for (const target of [missing, gone, dying, bobQueue, w]) {
      const res = await update(
        host,
        uid,
        1,
        consumerSpec(q, w, { deadLetterQueue: { resourceUid: target } }),
      );
      expectProblem(res, 409, 'dependency_conflict');
    }
    // The worker's code stops declaring `queue`: an update is re-verified and refused.
    host.workers.set(SPACE, 'upd-worker', ['fetch']);
    expectProblem(
      await update(host, uid, 1, consumerSpec(q, w, { maxBatchSize: 2 })),
      409,
      'dependency_conflict',
    );
    expect(await tableSnapshot(host)).toEqual(table);
    expect((await getResource(host, uid)).body).toEqual(before);
    host.workers.set(SPACE, 'upd-worker', ['queue']);
    expect((await update(host, uid, 1, consumerSpec(q, w, { maxBatchSize: 2 }))).status).toBe(202);
    await host.settle();
  });
});
