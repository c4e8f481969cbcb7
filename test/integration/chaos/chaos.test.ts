/**
 * A bounded slice of the fault-injection suite (test/chaos, `npm run test:chaos`) inside
 * `npm test`: four short seeded schedules against the local Host as a child process, two at a
 * time — `kill -9` mid-delivery, a crash at `delivery.after-settle`, a crash at an Operation
 * point, and the DynamoDB stand-in killed twice under load. Each must lose nothing, flip no
 * settlement, never exceed maxConcurrency, leave one SQS queue per live queue Resource and be
 * healthy again afterwards. A failure names its seed: `npm run test:chaos -- --seed S --profile short`.
 */
import { describe, expect, it } from 'vitest';
import { formatResult } from '../../chaos/report.ts';
import { runSchedule, type ScheduleResult } from '../../chaos/run-schedule.ts';
import { scheduleFor } from '../../chaos/schedule.ts';

/** Short-profile seeds chosen for their faults (see `--describe`). */
const SEEDS = [6, 9, 3, 5];

describe('chaos: seeded fault schedules against the local Host', () => {
  it('RC-01 RC-02 RC-03 RC-04 DL-02 DL-03 DL-07 DL-08: no message lost, no settlement flipped, no concurrency breach', async () => {
    const results: ScheduleResult[] = [];
    const queue = [...SEEDS];
    const lane = async () => {
      for (let seed = queue.shift(); seed !== undefined; seed = queue.shift()) {
        results.push(await runSchedule(scheduleFor(seed, 'short'), { convergeBoundMs: 45_000 }));
      }
    };
    await Promise.all([lane(), lane()]);
    const report = results
      .sort((a, b) => a.seed - b.seed)
      .map(formatResult)
      .join('\n');
    console.info(report);
    for (const r of results) {
      expect(r.failures, `seed ${r.seed}:\n${report}`).toEqual([]);
      expect(r.delivery?.lost).toEqual([]);
      expect(r.delivery?.flips).toEqual([]);
      expect(r.delivery?.breaches).toEqual([]);
      expect(r.delivery?.sent).toBeGreaterThan(0);
    }
    // The schedules did what they are for: kills, a crash point, stand-in restarts.
    expect(results.reduce((n, r) => n + r.hostKills, 0)).toBeGreaterThanOrEqual(3);
    expect(results.reduce((n, r) => n + r.crashPointKills, 0)).toBeGreaterThanOrEqual(1);
    expect(results.reduce((n, r) => n + r.standInRestarts, 0)).toBeGreaterThanOrEqual(1);
  }, 170_000);
});
