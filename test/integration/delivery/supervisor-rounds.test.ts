/**
 * The supervisor's round at scale: consumers visited in parallel within a bound, a round that
 * stops starting visits when its time runs out and a next round that goes on from there, one
 * round at a time (the ledger's lease, a conditional write on DynamoDB Local), and one
 * consumer's lane starts in parallel within a bound. The AWS calls of a visit are stand-ins with
 * a fixed latency; the ledger is the real adapter on the DynamoDB stand-in.
 */
import { randomUUID } from 'node:crypto';
import { beforeAll, describe, expect, inject, it } from 'vitest';
import { dynamoDbClient } from '../../../lambdas/adapters/aws/clients.ts';
import { createHostTable } from '../../../lambdas/adapters/aws/create-host-table.ts';
import { DynamoSupervisorLedger } from '../../../lambdas/adapters/aws/dynamodb-supervisor-ledger.ts';
import { ControlLoop, LANE_START_PARALLEL } from '../../../lambdas/delivery/control-loop.ts';
import type { QueueTarget } from '../../../lambdas/delivery/ports.ts';
import {
  SUPERVISE_PARALLEL,
  type SupervisionDeps,
  superviseRound,
  VISIT_TRIES,
} from '../../../lambdas/delivery/supervision.ts';

/** What one AWS call of a visit takes here (DynamoDB or SQS from a Lambda: a few ms to tens). */
const CALL_MS = 5;
const call = () => new Promise<void>((r) => setTimeout(r, CALL_MS));

/** `n` active consumers and stand-ins for what a visit calls; `visits` records who was visited. */
function consumers(n: number) {
  const uids = Array.from(
    { length: n },
    (_, i) => `c${String(i).padStart(4, '0')}-${randomUUID().slice(0, 8)}`,
  );
  const visits: string[] = [];
  const target = (uid: string): QueueTarget => ({
    queueUid: `q-${uid}`,
    queueName: uid,
    space: 'team',
    sqsUrl: `https://sqs.test/${uid}`,
    defaultDelaySeconds: 0,
    retentionSeconds: 3600,
  });
  const deps: SupervisionDeps = {
    attachments: {
      listActive: async () => {
        await call();
        return uids.map((consumerUid) => ({ consumerUid, generation: 1 }));
      },
      get: async (consumerUid) => {
        await call();
        return {
          consumerUid,
          space: 'team',
          queueName: consumerUid,
          generation: 1,
          state: 'active',
          spec: { queue: { resourceUid: `q-${consumerUid}` }, maxBatchSize: 10, maxConcurrency: 2 },
        } as never;
      },
    },
    queueDirectory: {
      queue: async (queueUid) => {
        await call();
        return target(queueUid.slice(2));
      },
    },
    messages: {
      counts: async () => {
        await call();
        return { visible: 0, inFlight: 0, delayed: 0 };
      },
    },
    loop: {
      // recoverExpired, the visible count, the slot map: three calls.
      superviseConsumer: async (c: { consumerUid: string }) => {
        await call();
        await call();
        await call();
        visits.push(c.consumerUid);
        return { recovered: 0, started: 0, visible: 0 };
      },
    } as unknown as ControlLoop,
  };
  return { uids, visits, deps };
}

describe('supervision rounds (ledger on the DynamoDB stand-in)', () => {
  let tableName: string;
  const client = dynamoDbClient(inject('ddbEndpoint'));
  beforeAll(async () => {
    tableName = `sup-${randomUUID()}`;
    await createHostTable(client, tableName);
  });
  const ledger = () => new DynamoSupervisorLedger(client, tableName);

  it('300 consumers, a round whose time runs out part way: the next round goes on from there, and every consumer is visited within two rounds', async () => {
    const c = consumers(300);
    const deps = { ...c.deps, ledger: ledger() };
    // About a third of the visits fit the budget (6 calls a visit, 16 at once).
    const first = await superviseRound(deps, Date.now(), { budgetMs: 150 });
    expect(first.skipped).toBeUndefined();
    // At least its first wave, however slow the stand-ins are today.
    expect(first.visited).toBeGreaterThanOrEqual(SUPERVISE_PARALLEL);
    expect(first.visited).toBeLessThan(300);
    expect(first.resumeAfter).toBe([...c.uids].sort()[first.visited - 1]);
    const afterFirst = new Set(c.visits);
    // A new ledger instance: what the next invocation (perhaps a cold start) reads.
    const second = await superviseRound({ ...deps, ledger: ledger() }, Date.now(), { budgetMs: 60_000 });
    expect(second.visited).toBe(300);
    // The second round began with the consumers the first never reached.
    const secondOrder = c.visits.slice(afterFirst.size);
    expect(afterFirst.has(secondOrder[0] as string)).toBe(false);
    expect(new Set(c.visits).size).toBe(300);
    expect(second.resumeAfter).toBeUndefined();
    process.stdout.write(
      `[supervisor-rounds] 300 consumers, budget 150 ms: round 1 visited ${first.visited}, round 2 the other ${300 - first.visited} first\n`,
    );
  });

  it('a visit that fails (a throttle past the SDK’s retries) is tried again within the round, not a minute later', async () => {
    const c = consumers(3);
    const failing = c.uids[1] as string;
    let failures = 0;
    const visit = c.deps.loop.superviseConsumer.bind(c.deps.loop);
    c.deps.loop.superviseConsumer = (async (...args: Parameters<typeof visit>) => {
      if (args[0].consumerUid === failing && failures < VISIT_TRIES - 1) {
        failures++;
        throw Object.assign(new Error('Throughput exceeds the current capacity'), {
          name: 'ProvisionedThroughputExceededException',
        });
      }
      return visit(...args);
    }) as typeof visit;
    const r = await superviseRound({ ...c.deps, ledger: ledger() }, Date.now());
    expect(failures).toBe(VISIT_TRIES - 1);
    expect([...c.visits].sort()).toEqual([...c.uids].sort());
    expect(r.visited).toBe(3);
  });

  it('a second round started while one is under way does nothing (the lease)', async () => {
    const c = consumers(40);
    const a = superviseRound({ ...c.deps, ledger: ledger() }, Date.now());
    const b = superviseRound({ ...c.deps, ledger: ledger() }, Date.now());
    const results = await Promise.all([a, b]);
    expect(results.filter((r) => r.skipped)).toHaveLength(1);
    expect(c.visits).toHaveLength(40);
    // Released at its end: the next round runs.
    const next = await superviseRound({ ...c.deps, ledger: ledger() }, Date.now());
    expect(next.skipped).toBeUndefined();
    expect(next.visited).toBe(40);
  });

  it('a round visits at most SUPERVISE_PARALLEL consumers at once; measured against one at a time', async () => {
    const timings: Record<string, number> = {};
    for (const n of [50, 300]) {
      for (const parallel of [1, SUPERVISE_PARALLEL]) {
        const c = consumers(n);
        let inFlight = 0;
        let peak = 0;
        const loop = c.deps.loop;
        const counted = {
          superviseConsumer: async (...args: Parameters<ControlLoop['superviseConsumer']>) => {
            peak = Math.max(peak, ++inFlight);
            try {
              return await loop.superviseConsumer(...args);
            } finally {
              inFlight--;
            }
          },
        } as unknown as ControlLoop;
        const began = performance.now();
        const r = await superviseRound({ ...c.deps, loop: counted }, Date.now(), { parallel });
        timings[`${n} consumers, ${parallel} at once`] = Math.round(performance.now() - began);
        expect(r.visited).toBe(n);
        expect(peak).toBeLessThanOrEqual(parallel);
      }
    }
    // Reported, not asserted: the machine's speed is not the design's.
    process.stdout.write(
      `[supervisor-rounds] round duration (ms, ${CALL_MS} ms a call): ${JSON.stringify(timings)}\n`,
    );
  });
});

describe('one consumer’s lane starts', () => {
  it(`start at most LANE_START_PARALLEL (${LANE_START_PARALLEL}) at once, all of them`, async () => {
    let inFlight = 0;
    let peak = 0;
    const names: string[] = [];
    const service = {
      recoverExpired: async () => 0,
      dispatchState: async () => ({ slots: {} }),
      sealedCohort: async (_c: string, _g: number, n: number) => Array.from({ length: n }, () => undefined),
      prepareSlots: async () => {},
      laneKindOf: () => 'standard',
    };
    const loop = new ControlLoop({
      service: service as never,
      launcher: {
        start: async (name) => {
          peak = Math.max(peak, ++inFlight);
          await call();
          inFlight--;
          names.push(name);
          return 'started';
        },
      },
    });
    const began = performance.now();
    const r = await loop.superviseConsumer(
      { consumerUid: 'big', generation: 1, maxBatchSize: 10, maxConcurrency: 250 },
      async () => 10_000,
      Date.now(),
    );
    const ms = Math.round(performance.now() - began);
    expect(r.started).toBe(250);
    expect(new Set(names).size).toBe(250);
    expect(peak).toBe(LANE_START_PARALLEL);
    process.stdout.write(
      `[supervisor-rounds] 250 lane starts of one consumer: ${ms} ms (${CALL_MS} ms a start)\n`,
    );
  });
});
