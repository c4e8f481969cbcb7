import { describe, expect, it } from 'vitest';
import {
  ControlLoop,
  gatheringSlots,
  type LaneInput,
  laneNames,
  lanesAfterBatch,
  lanesForBacklog,
  lanesOnWake,
  WAKE_LATER_MAX_LANES,
  WAKE_LATER_MAX_SECONDS,
} from '../../../lambdas/delivery/control-loop.ts';
import type { DeliveryService } from '../../../lambdas/delivery/delivery-service.ts';

const uid = `r${'0'.repeat(26)}`; // a Resource uid's length
const state = (slots: Record<string, number>, registered: string[] = [], extra = {}) => ({
  slots,
  registered: Object.fromEntries(registered.map((b) => [b, true])),
  wakes: 0,
  ...extra,
});

describe('control loop policy', () => {
  it('lanes for a backlog: enough batches for it, within maxConcurrency (any of 1..250), minus the slots held', () => {
    expect(lanesForBacklog({ visible: 0, maxBatchSize: 10, maxConcurrency: 5, held: 0 })).toBe(0);
    expect(lanesForBacklog({ visible: 1, maxBatchSize: 10, maxConcurrency: 5, held: 0 })).toBe(1);
    expect(lanesForBacklog({ visible: 25, maxBatchSize: 10, maxConcurrency: 5, held: 0 })).toBe(3);
    expect(lanesForBacklog({ visible: 25, maxBatchSize: 10, maxConcurrency: 5, held: 2 })).toBe(1);
    expect(lanesForBacklog({ visible: 10_000, maxBatchSize: 1, maxConcurrency: 250, held: 0 })).toBe(250);
    expect(lanesForBacklog({ visible: 10_000, maxBatchSize: 1, maxConcurrency: 250, held: 250 })).toBe(0);
  });

  it('a full batch adds one lane while a slot is free', () => {
    expect(lanesAfterBatch({ full: true, room: true })).toBe(1);
    expect(lanesAfterBatch({ full: true, room: false })).toBe(0);
    expect(lanesAfterBatch({ full: false, room: true })).toBe(0);
  });

  it('a send wakes only a consumer with no lane receiving or starting, and a free slot', () => {
    const now = 1_000_000;
    const tail = 60_000;
    const soon = now + tail + 10_000; // a gathering deadline: the receive window is still open
    expect(lanesOnWake(state({}), 2, now, tail)).toBe(1);
    // A lane is receiving (its slot holds no batch yet).
    expect(gatheringSlots(state({ a: soon }), now, tail)).toBe(1);
    expect(lanesOnWake(state({ a: soon }), 2, now, tail)).toBe(0);
    // Every lane runs a handler: a new one may start for the new message.
    expect(lanesOnWake(state({ a: soon }, ['a']), 2, now, tail)).toBe(1);
    // ... unless every slot is held.
    expect(lanesOnWake(state({ a: soon, b: soon }, ['a', 'b']), 2, now, tail)).toBe(0);
    // A lane a wake started has not taken its slot yet (lease), until the lease runs out.
    expect(lanesOnWake(state({}, [], { starting: now + 1 }), 2, now)).toBe(0);
    expect(lanesOnWake(state({}, [], { starting: now - 1 }), 2, now)).toBe(1);
  });

  it('a slot past its receive window covers no backlog: its lane registers or is gone', () => {
    const now = 1_000_000;
    const tail = 60_000;
    // Taken a while ago: its gathering deadline is within the room left for registration.
    const stale = state({ a: now + tail - 1 });
    expect(gatheringSlots(stale, now, tail)).toBe(0);
    expect(lanesOnWake(stale, 2, now, tail)).toBe(1);
    // It still counts against maxConcurrency.
    expect(lanesOnWake(stale, 1, now, tail)).toBe(0);
  });

  it('execution names are valid Step Functions names (≤ 80 of [A-Za-z0-9_-]) for the longest generation', () => {
    const g = 2 ** 31;
    const now = Date.parse('2999-12-31T23:59:59Z');
    for (const name of [
      laneNames.wake(uid, g, 2 ** 40),
      laneNames.supervisor(uid, g, now, 249),
      laneNames.spawn(uid, g),
      laneNames.handover(uid, g),
      laneNames.later(uid, g, Math.floor(now / 1000) + 43_200),
    ]) {
      expect(name.length).toBeLessThanOrEqual(80);
      expect(name).toMatch(/^[A-Za-z0-9_-]+$/);
    }
    // Supervisor rounds of the same second share names; spawns and hand-overs never do.
    expect(laneNames.supervisor(uid, 1, 5_000, 0)).toBe(laneNames.supervisor(uid, 1, 5_999, 0));
    expect(laneNames.supervisor(uid, 1, 5_000, 0)).not.toBe(laneNames.supervisor(uid, 1, 6_000, 0));
    expect(laneNames.spawn(uid, 1)).not.toBe(laneNames.spawn(uid, 1));
  });

  it('messages due later get one lane per distinct second, the earliest few, none past the bound', async () => {
    const started: { name: string; input: LaneInput }[] = [];
    const names = new Set<string>();
    const loop = new ControlLoop({
      service: {} as DeliveryService,
      launcher: {
        start: async (name, input) => {
          if (names.has(name)) return 'exists';
          names.add(name);
          started.push({ name, input });
          return 'started';
        },
      },
      clock: () => 1_000_000,
    });
    await loop.wakeLater(uid, 1, [30, 30, 30, 0, 5]);
    expect(started.map((s) => s.input.startAfter)).toEqual([5, 30]);
    expect(started.map((s) => s.name)).toEqual([`${uid}-g1-d1005`, `${uid}-g1-d1030`]);
    // The same due seconds again (another batch of the same retries): nothing new.
    await loop.wakeLater(uid, 1, [30, 5]);
    expect(started).toHaveLength(2);
    started.length = 0;
    await loop.wakeLater(uid, 1, [1, 2, 3, 4, 5, 6, WAKE_LATER_MAX_SECONDS + 1]);
    expect(started.map((s) => s.input.startAfter)).toEqual([1, 2, 3, 4].slice(0, WAKE_LATER_MAX_LANES));
  });

  it('a retry storm’s finalisations asking for the same due seconds start one lane each from a process, even where names do not deduplicate (Express)', async () => {
    const now = 2_000_000;
    const started: string[] = [];
    let refuse = false;
    const loop = new ControlLoop({
      service: {} as DeliveryService,
      // Express: every StartExecution starts an execution, whatever its name.
      launcher: {
        start: async (name) => {
          if (refuse) throw Object.assign(new Error('Rate exceeded'), { name: 'ThrottlingException' });
          started.push(name);
          return 'started';
        },
      },
      clock: () => now,
    });
    for (let batch = 0; batch < 100; batch++) await loop.wakeLater(uid, 1, [5]);
    expect(started).toEqual([`${uid}-g1-d2005`]);
    // A start that failed is not remembered: the next finalisation asks again.
    refuse = true;
    await loop.wakeLater(uid, 1, [6]);
    refuse = false;
    await loop.wakeLater(uid, 1, [6]);
    expect(started).toEqual([`${uid}-g1-d2005`, `${uid}-g1-d2006`]);
  });
});
