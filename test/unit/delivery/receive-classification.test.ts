/**
 * The registration's decision for each received message, before anything is written
 * (receive-classification.ts): exact attempt numbers (DL-07), duplicates ridden with their first
 * copy, delays honoured (DL-06), uncommitted sends held then discarded, acknowledged copies removed.
 */
import { describe, expect, it } from 'vitest';
import type { AttemptsRecord } from '../../../lambdas/delivery/delivery-store.ts';
import { classifyReceived, type ReceiveFacts } from '../../../lambdas/delivery/receive-classification.ts';
import type { Received } from '../../../lambdas/delivery/registration.ts';

const NOW = 1_800_000_000_000;

function received(
  id: string,
  handle: string,
  extra: Partial<Received['envelope']> = {},
  sentAt?: number,
): Received {
  return {
    receiptHandle: handle,
    receivedAt: NOW - 100,
    ...(sentAt !== undefined ? { sentAt } : {}),
    envelope: { id, ts: NOW - 1_000, ...extra },
  };
}

function facts(over: Partial<ReceiveFacts> = {}, records: AttemptsRecord[] = []): ReceiveFacts {
  return {
    committed: new Set(),
    records: new Map(records.map((r) => [r.id, r])),
    now: NOW,
    maxRetries: 2,
    commitTimeoutMs: 15 * 60_000,
    deferAfterMs: 60_000,
    ...over,
  };
}

describe('classifyReceived', () => {
  it('DL-07 a message without a record is attempt 1; one with a record is its next attempt', () => {
    const out = classifyReceived(
      [received('a', 'ha'), received('b', 'hb')],
      facts({}, [{ id: 'b', attempts: 2 }]),
    );
    expect(out.deliver).toEqual([
      { received: 0, attempts: 1 },
      { received: 1, attempts: 3 },
    ]);
    expect(out.entries.map((e) => [e.id, e.attempts, e.hadRecord])).toEqual([
      ['a', 1, false],
      ['b', 3, true],
    ]);
    expect(out.moves).toEqual([]);
  });

  it('DL-07 a stray SQS copy of a committed send (one the producer’s answer did not name) is removed unseen; the named one is delivered', () => {
    const copy = (handle: string, queueMessageId: string) => ({
      ...received('a', handle, { commit: 'c1' }),
      queueMessageId,
    });
    const out = classifyReceived(
      [copy('h-stray', 'q-first-try'), copy('h-named', 'q-retry'), received('b', 'hb', { commit: 'c1' })],
      facts({ committed: new Set(['c1']), onlyCopies: new Map([['c1', { a: 'q-retry' }]]) }),
    );
    expect(out.remove).toEqual(['h-stray']);
    expect(out.deliver).toEqual([
      { received: 1, attempts: 1 },
      { received: 2, attempts: 1 },
    ]);
    expect(out.entries.map((e) => [e.id, e.handles])).toEqual([
      ['a', ['h-named']],
      ['b', ['hb']],
    ]);
  });

  it('DL-07 a message past 1 + maxRetries is owed a move with the attempts it had, never delivered', () => {
    const out = classifyReceived([received('a', 'ha')], facts({ maxRetries: 2 }, [{ id: 'a', attempts: 3 }]));
    expect(out.deliver).toEqual([]);
    expect(out.moves.map((m) => [m.id, m.attempts, m.handles])).toEqual([['a', 3, ['ha']]]);
  });

  it('DL-07 an SQS duplicate rides with its first copy: one decision, every handle kept', () => {
    const out = classifyReceived([received('a', 'h1'), received('b', 'hb'), received('a', 'h2')], facts());
    expect(out.deliver).toEqual([
      { received: 0, attempts: 1 },
      { received: 1, attempts: 1 },
    ]);
    expect(out.entries[0]?.handles).toEqual(['h1', 'h2']);
  });

  it('DL-06 AQ-04 a message not due yet (a delay, a retry delay) is hidden until it is', () => {
    const out = classifyReceived(
      [received('a', 'ha', { notBefore: NOW + 9_500 }), received('b', 'hb')],
      facts({}, [{ id: 'b', attempts: 1, notBefore: NOW + 30_000 }]),
    );
    expect(out.hide).toEqual([
      { handle: 'ha', seconds: 10 },
      { handle: 'hb', seconds: 30 },
    ]);
    expect(out.deliver).toEqual([]);
    expect(out.defer).toEqual([]);
  });

  it('DL-06 a message due a minute or more from now is deferred, not hidden: out of SQS’s in-flight count', () => {
    const out = classifyReceived(
      [
        received('a', 'ha', { notBefore: NOW + 3_600_000 }),
        received('b', 'hb'),
        received('c', 'hc'),
        received('a', 'ha2', { notBefore: NOW + 3_600_000 }),
      ],
      facts({}, [
        { id: 'b', attempts: 1, notBefore: NOW + 60_000 },
        { id: 'c', attempts: 1, notBefore: NOW + 59_000 },
      ]),
    );
    // One deferral per Host id, every SQS copy's handle with it; just under the bound: hidden.
    expect(out.defer).toEqual([
      { received: 0, notBefore: NOW + 3_600_000, handles: ['ha', 'ha2'] },
      { received: 1, notBefore: NOW + 60_000, handles: ['hb'] },
    ]);
    expect(out.hide).toEqual([{ handle: 'hc', seconds: 59 }]);
    expect(out.deliver).toEqual([]);
  });

  it('AQ-04 a send whose commit has not landed is held briefly, and removed once past the commit timeout', () => {
    const young = received('a', 'ha', { commit: 'c1' }, NOW - 1_000);
    const old = received('b', 'hb', { commit: 'c2' }, NOW - 16 * 60_000);
    const done = received('c', 'hc', { commit: 'c3' });
    const out = classifyReceived([young, old, done], facts({ committed: new Set(['c3']) }));
    expect(out.hide).toEqual([{ handle: 'ha', seconds: 2 }]);
    expect(out.remove).toEqual(['hb']);
    expect(out.deliver).toEqual([{ received: 2, attempts: 1 }]);
  });

  it('DL-07 an acknowledged copy seen again is removed with every handle, its record cleared after', () => {
    const out = classifyReceived(
      [received('a', 'h1'), received('a', 'h2')],
      facts({}, [{ id: 'a', attempts: 1, acked: true }]),
    );
    expect(out.remove).toEqual(['h1', 'h2']);
    expect(out.removeAcked).toEqual([{ id: 'a', handles: ['h1', 'h2'] }]);
    expect(out.deliver).toEqual([]);
  });
});
