import { describe, expect, it } from 'vitest';
import { roundTime } from '../../../lambdas/entries/supervisor.ts';

// DL-02 / RC-01: a supervisor round delivered twice must start each of its lanes once, so the
// round is named by the event's scheduled time, never by when the Lambda happened to run.
describe('supervisor round time', () => {
  const scheduled = Date.parse('2026-12-01T19:21:00Z');

  it('takes the EventBridge event time, the same in every delivery of the event', () => {
    const event = { 'detail-type': 'Scheduled Event', time: '2026-12-01T19:21:00Z' };
    expect(roundTime(event, scheduled + 1_500)).toBe(scheduled);
    expect(roundTime(event, scheduled + 20 * 60_000)).toBe(scheduled); // a late redelivery
  });

  it('falls back to now for a manual invoke, a malformed or an implausible time', () => {
    const now = scheduled + 5_000;
    expect(roundTime(undefined, now)).toBe(now);
    expect(roundTime(null, now)).toBe(now);
    expect(roundTime({}, now)).toBe(now);
    expect(roundTime({ time: 12345 }, now)).toBe(now);
    expect(roundTime({ time: 'yesterday-ish' }, now)).toBe(now);
    expect(roundTime({ time: `2026-12-01T19:21:00Z${' '.repeat(100)}` }, now)).toBe(now); // unbounded input
    expect(roundTime({ time: '2026-12-01T21:00:00Z' }, now)).toBe(now); // in the future
    expect(roundTime({ time: '2026-11-30T19:21:00Z' }, now)).toBe(now); // a day old
  });
});
