/**
 * Lanes for messages due later (retry delays) across processes. On AWS every batch-host sandbox
 * is a process, and in a retry storm each one's finalisations ask for lanes at the same few
 * seconds; Express names do not deduplicate, so each ask that starts a lane spends the account's
 * StartExecution bucket. Three control loops (three processes) share one table on DynamoDB Local;
 * their launchers record what they start.
 */
import { randomUUID } from 'node:crypto';
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { beforeAll, describe, expect, inject, it } from 'vitest';
import { dynamoDbClient } from '../../../lambdas/adapters/aws/clients.ts';
import { createHostTable } from '../../../lambdas/adapters/aws/create-host-table.ts';
import { DynamoDeliveryStore } from '../../../lambdas/adapters/aws/dynamodb-delivery-store.ts';
import { ControlLoop } from '../../../lambdas/delivery/control-loop.ts';
import type { DeliveryService } from '../../../lambdas/delivery/delivery-service.ts';
import { dueWatchUntil } from '../../../lambdas/delivery/slots.ts';
import { loseAnswers } from '../../support/lost-answer.ts';

const IDLE_WAIT_SECONDS = 10;

describe('DL-01 lanes for messages due later: one per consumer and idle wait, whichever process asks', () => {
  let client: DynamoDBClient;
  let store: DynamoDeliveryStore;

  beforeAll(async () => {
    client = dynamoDbClient(inject('ddbEndpoint'));
    const table = `t-${randomUUID()}`;
    await createHostTable(client, table);
    store = new DynamoDeliveryStore(client, table);
  });

  /** Three processes' control loops at one instant; `refuse` makes a launcher fail. */
  function processes(now: number, consumerUid?: string) {
    const started: string[] = [];
    const refusing = new Set<number>();
    const loops = [0, 1, 2].map(
      (p) =>
        new ControlLoop({
          service: {} as DeliveryService,
          ...(consumerUid
            ? { consumerOfQueue: async () => ({ consumerUid, generation: 1, maxConcurrency: 2 }) }
            : {}),
          launcher: {
            start: async (name) => {
              if (refusing.has(p))
                throw Object.assign(new Error('Rate exceeded'), { name: 'ThrottlingException' });
              started.push(name);
              return 'started';
            },
          },
          clock: () => now,
          dueLanes: {
            claim: (uid, at) => store.claimDueLane(uid, at, IDLE_WAIT_SECONDS),
            forget: (uid, at) => store.forgetDueLane(uid, at),
          },
        }),
    );
    return { loops, started, refusing };
  }

  it('DL-01 a retry storm in three processes starts one lane for a due second, none for seconds its idle wait covers, one past it', async () => {
    const uid = `c-${randomUUID()}`;
    const now = 3_000_000_000;
    const { loops, started } = processes(now);
    for (let batch = 0; batch < 10; batch++) for (const loop of loops) await loop.wakeLater(uid, 1, [5]);
    expect(started).toEqual([`${uid}-g1-d3000005`]);
    // Messages due 3 and 9 s after that lane starts return while it still polls.
    for (const loop of loops) await loop.wakeLater(uid, 1, [8, 14]);
    expect(started).toHaveLength(1);
    // Past its idle wait: one more lane, from whichever process asks first.
    await loops[1]?.wakeLater(uid, 1, [15]);
    await loops[2]?.wakeLater(uid, 1, [15, 16]);
    expect(started).toEqual([`${uid}-g1-d3000005`, `${uid}-g1-d3000015`]);
    // Due before the claimed lane starts: a lane of its own.
    await loops[0]?.wakeLater(uid, 1, [2]);
    expect(started).toHaveLength(3);
  });

  it('DL-01 a take answers the due claim, and lanes taking slots within its window watch the queue until it ends', async () => {
    const uid = `c-${randomUUID()}`;
    const at = 3_300_000_005;
    const { loops, started } = processes((at - 5) * 1000);
    await loops[0]?.wakeLater(uid, 1, [5]);
    expect(started).toEqual([`${uid}-g1-d${at}`]);
    const taken = await store.takeSlot(uid, `b-${randomUUID()}`, Date.now() + 60_000, {
      max: 2,
      generation: 1,
    });
    expect(taken.taken).toBe(true);
    expect(taken.state.dueLaneAt).toBe(at);
    // The lane claimed takes its slot at its second: it polls to the end of the window the claim
    // refused other lanes for, and so does any lane taking a slot inside it.
    expect(dueWatchUntil(at, at * 1000 + 200, IDLE_WAIT_SECONDS)).toBe((at + IDLE_WAIT_SECONDS) * 1000);
    expect(dueWatchUntil(at, (at + 7) * 1000, IDLE_WAIT_SECONDS)).toBe((at + IDLE_WAIT_SECONDS) * 1000);
    // A claim still ahead is its own lane's; one whose window passed binds no one.
    expect(dueWatchUntil(at, (at - 3) * 1000, IDLE_WAIT_SECONDS)).toBeUndefined();
    expect(dueWatchUntil(at, (at + IDLE_WAIT_SECONDS) * 1000, IDLE_WAIT_SECONDS)).toBeUndefined();
    expect(dueWatchUntil(undefined, at * 1000, IDLE_WAIT_SECONDS)).toBeUndefined();
  });

  it('DL-01 a delayed send through the Host starts a lane for the second its messages become visible, as a retry does', async () => {
    const uid = `c-${randomUUID()}`;
    const now = 3_400_000_000;
    const { loops, started } = processes(now, uid);
    // Messages delayed 5 s, none due now: no wake for now, a lane due at their second.
    await loops[0]?.wake('queue-uid', [5], false);
    expect(started).toEqual([`${uid}-g1-d3400005`]);
    // Another process's send delayed 8 s is covered by that lane, which still polls then; one
    // delayed 30 s is not.
    await loops[1]?.wake('queue-uid', [8], false);
    expect(started).toHaveLength(1);
    await loops[2]?.wake('queue-uid', [30], false);
    expect(started).toEqual([`${uid}-g1-d3400005`, `${uid}-g1-d3400030`]);
  });

  it('DL-01 a lane whose start failed gives its claim back: the next ask, from any process, starts it', async () => {
    const uid = `c-${randomUUID()}`;
    const { loops, started, refusing } = processes(3_100_000_000);
    refusing.add(0);
    await loops[0]?.wakeLater(uid, 1, [5]);
    expect(started).toEqual([]);
    await loops[1]?.wakeLater(uid, 1, [5]);
    expect(started).toEqual([`${uid}-g1-d3100005`]);
  });

  it('DL-01 a claim whose answer was lost is held by the ask that made it', async () => {
    const uid = `c-${randomUUID()}`;
    const { loops, started } = processes(3_200_000_000);
    const lost = loseAnswers(
      client,
      (command, input) => command === 'UpdateItemCommand' && /dueLaneAt/.test(String(input.UpdateExpression)),
      { times: 1 },
    );
    try {
      await loops[0]?.wakeLater(uid, 1, [5]);
    } finally {
      lost.remove();
    }
    expect(lost.lost()).toBe(1);
    expect(started).toEqual([`${uid}-g1-d3200005`]);
  });
});
