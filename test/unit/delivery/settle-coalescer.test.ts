/**
 * Issue 12: the runner's settle coalescing. One Host call in flight per batch, calls grouped in
 * the order made, each Promise settled with its own call's answer.
 */
import { describe, expect, it } from 'vitest';
import { NamedError } from '../../../lambdas/delivery/limits.ts';
import { coalescingSettle, type SettleSender } from '../../../lambdas/delivery/settle-coalescer.ts';
import type { SettleAnswer, SettleCall } from '../../../lambdas/delivery/settlement-protocol.ts';

const outcome = (p: Promise<unknown>) =>
  p.then(
    () => 'resolved',
    (err: Error) => err.name,
  );

/** A sender that records each Host call and how many were in flight at once. */
function recordingSender(answer: (calls: SettleCall[]) => SettleAnswer[] | Promise<SettleAnswer[]>) {
  const groups: SettleCall[][] = [];
  let inFlight = 0;
  let peak = 0;
  const track = async <T>(calls: SettleCall[], run: () => T | Promise<T>) => {
    groups.push(calls);
    peak = Math.max(peak, ++inFlight);
    try {
      await new Promise((r) => setTimeout(r, 5));
      return await run();
    } finally {
      inFlight--;
    }
  };
  const sender: SettleSender = {
    one: async (call) => {
      const [a] = await track([call], () => answer([call]));
      if (a !== 'ok') throw new NamedError(a ?? 'backend_unavailable', 'refused');
    },
    many: (calls) => track(calls, () => answer(calls)),
  };
  return { sender, groups, peak: () => peak };
}

const acks = (n: number): SettleCall[] => Array.from({ length: n }, (_, index) => ({ kind: 'ack', index }));

describe('coalescingSettle (issue 12)', () => {
  it('DL-03 250 concurrent calls cost 3 Host calls of at most 100, one at a time, in the order made; every Promise resolves', async () => {
    const r = recordingSender((calls) => calls.map(() => 'ok'));
    const settle = coalescingSettle(r.sender);
    const results = await Promise.all(acks(250).map((c) => outcome(settle(c))));
    expect(results).toEqual(acks(250).map(() => 'resolved'));
    expect(r.groups.map((g) => g.length)).toEqual([100, 100, 50]);
    expect(r.groups.flat()).toEqual(acks(250));
    expect(r.peak()).toBe(1);
  });

  it('calls made while a group is in flight go together in the next one', async () => {
    const r = recordingSender((calls) => calls.map(() => 'ok'));
    const settle = coalescingSettle(r.sender);
    const first = settle({ kind: 'ack', index: 0 });
    await new Promise((res) => setImmediate(res)); // the first call has left alone
    const later = [1, 2, 3].map((index) => settle({ kind: 'retry', index }));
    await Promise.all([first, ...later]);
    expect(r.groups).toEqual([
      [{ kind: 'ack', index: 0 }],
      [
        { kind: 'retry', index: 1 },
        { kind: 'retry', index: 2 },
        { kind: 'retry', index: 3 },
      ],
    ]);
    expect(r.peak()).toBe(1);
  });

  it('DL-03 each Promise gets its own call’s answer: a refused call rejects with its name, the others resolve', async () => {
    const r = recordingSender(() => ['ok', 'already_settled', 'unknown_batch', 'backend_unavailable']);
    const settle = coalescingSettle(r.sender);
    const results = await Promise.all(
      [
        { kind: 'ack', index: 0 },
        { kind: 'retry', index: 0 },
        { kind: 'ack', index: 9 },
        { kind: 'ackAll' },
      ].map((c) => outcome(settle(c as SettleCall))),
    );
    expect(results).toEqual(['resolved', 'already_settled', 'unknown_batch', 'backend_unavailable']);
    expect(r.groups).toHaveLength(1);
  });

  it('DL-08 a group that fails as a whole rejects every call in it; the next group is still sent', async () => {
    let failed = false;
    const r = recordingSender((calls) => {
      if (!failed) {
        failed = true;
        throw new NamedError('backend_unavailable', 'lost');
      }
      return calls.map(() => 'ok');
    });
    const settle = coalescingSettle(r.sender);
    const group = await Promise.all(acks(5).map((c) => outcome(settle(c))));
    expect(group).toEqual(acks(5).map(() => 'backend_unavailable'));
    expect(await outcome(settle({ kind: 'ackAll' }))).toBe('resolved');
  });

  it('a missing answer counts as not recorded (backend_unavailable), never as acknowledged', async () => {
    const r = recordingSender(() => ['ok']);
    const settle = coalescingSettle(r.sender);
    expect(await Promise.all(acks(2).map((c) => outcome(settle(c))))).toEqual([
      'resolved',
      'backend_unavailable',
    ]);
  });
});
