/**
 * The chaos suite's checkers (test/chaos/checks.ts) on hand-made evidence: each violation they
 * exist for is reported, so a green chaos run is not green because a checker cannot fail.
 */
import { describe, expect, it } from 'vitest';
import type { WorkerRecord } from '../../chaos/chaos-worker.ts';
import { checkDelivery, compareHeads, type DeliveryEvidence } from '../../chaos/checks.ts';
import type { HeadItem, ManifestItem } from '../../chaos/host-state.ts';
import { createRng } from '../../chaos/prng.ts';
import { scheduleFor } from '../../chaos/schedule.ts';

const head = (batchId: string, o: Partial<HeadItem> = {}): HeadItem => ({
  batchId,
  consumerUid: 'c',
  queueUid: 'qu',
  size: 1,
  closed: true,
  outcome: 'returned',
  applied: true,
  settled: {},
  doubtful: false,
  ...o,
});
const entry = (id: string, attempts: number): ManifestItem => ({
  id,
  ts: 0,
  attempts,
  hadRecord: attempts > 1,
});

/** One handler run of batch `b` at time `t` over `ids`, ended as `how` (undefined: never ended). */
function run(b: string, t: number, ids: string[], how?: 'returned' | 'threw', mode = 'ok', q = 'q') {
  const out: WorkerRecord[] = [{ ev: 'start', q, b, n: ids.length, p: 1, t }];
  ids.forEach((id, i) => {
    out.push({ ev: 'msg', q, b, i, id, a: 1, body: `chaos:1:${id}`, p: 1, t });
  });
  out.push({ ev: 'mode', b, m: mode, p: 1, t });
  if (how) out.push({ ev: 'end', b, how, p: 1, t: t + 10 });
  return out;
}

function evidence(o: Partial<DeliveryEvidence>): DeliveryEvidence {
  return {
    maxRetries: 0,
    maxConcurrency: 1,
    deadLetter: false,
    mainQueue: 'q',
    mainConsumerUid: 'c',
    accepted: [],
    records: [],
    deadLetterRecords: [],
    view: { heads: new Map(), manifests: new Map(), slots: new Map() },
    deaths: new Map(),
    workerTimeoutMs: 2000,
    ...o,
  };
}

describe('chaos checkers', () => {
  it('an accepted message never delivered, or retried and never back, is lost', () => {
    const v = checkDelivery(
      evidence({
        maxRetries: 1,
        accepted: [
          { id: 'x', seq: 0, body: 'chaos:1:x' },
          { id: 'y', seq: 1, body: 'chaos:1:y' },
        ],
        records: run('A', 0, ['y'], 'threw', 'throw'),
        view: {
          heads: new Map([['A', head('A', { outcome: 'threw' })]]),
          manifests: new Map([['A', [entry('y', 1)]]]),
          slots: new Map(),
        },
      }),
    );
    expect(v.lost).toEqual(['x (seq 0)', 'y (seq 1)']);
  });

  it('a return acknowledges, exhaustion drops (no dead-letter queue) or dead-letters by body', () => {
    const base = {
      accepted: [
        { id: 'x', seq: 0, body: 'chaos:1:x' },
        { id: 'y', seq: 1, body: 'chaos:1:y' },
      ],
      records: [...run('A', 0, ['x'], 'returned'), ...run('B', 100, ['y'], 'threw', 'throw')],
      view: {
        heads: new Map([
          ['A', head('A')],
          ['B', head('B', { outcome: 'threw' })],
        ]),
        manifests: new Map([
          ['A', [entry('x', 1)]],
          ['B', [entry('y', 1)]],
        ]),
        slots: new Map(),
      },
    };
    const dropped = checkDelivery(evidence(base));
    expect([dropped.acked, dropped.dropped, dropped.lost.length]).toEqual([1, 1, 0]);
    const missing = checkDelivery(evidence({ ...base, deadLetter: true, deadLetterQueue: 'dlq' }));
    expect(missing.lost).toEqual(['y (seq 1)']);
    const moved = checkDelivery(
      evidence({
        ...base,
        deadLetter: true,
        deadLetterQueue: 'dlq',
        deadLetterRecords: [
          { ev: 'start', q: 'dlq', b: 'D', n: 1, p: 1, t: 200 },
          { ev: 'msg', q: 'dlq', b: 'D', i: 0, id: 'new', a: 1, body: 'chaos:1:y', p: 1, t: 200 },
        ],
      }),
    );
    expect([moved.deadLettered, moved.lost.length, moved.orphanBatches]).toEqual([1, 0, ['D']]);
  });

  it('a dead letter no exhausted message explains is reported, unless it is the copy of an unconfirmed send that exhausted its deliveries', () => {
    // The first send of y got no answer but was queued (as 'y0'); its retry was accepted as 'y'
    // and acknowledged. 'y0' was registered once, never run (the Host died), and moved.
    const base = {
      maxRetries: 0,
      deadLetter: true,
      deadLetterQueue: 'dlq',
      accepted: [{ id: 'y', seq: 1, body: 'chaos:1:y' }],
      records: run('A', 0, ['y'], 'returned'),
      deadLetterRecords: [
        { ev: 'start', q: 'dlq', b: 'D', n: 1, p: 1, t: 200 },
        { ev: 'msg', q: 'dlq', b: 'D', i: 0, id: 'new', a: 1, body: 'chaos:1:y', p: 1, t: 200 },
      ] as WorkerRecord[],
      view: {
        heads: new Map([
          ['A', head('A')],
          ['B', head('B', { outcome: 'abandoned' })],
        ]),
        manifests: new Map([
          ['A', [entry('y', 1)]],
          ['B', [entry('y0', 1)]],
        ]),
        slots: new Map(),
      },
    };
    const explained = checkDelivery(evidence({ ...base, unconfirmedBodies: ['chaos:1:y'] }));
    expect([explained.unexplainedDeadLetters, explained.unconfirmedDeadLettered, explained.lost]).toEqual([
      [],
      1,
      [],
    ]);
    // Without the unconfirmed attempt, or without the exhausted copy, the dead letter is unexplained.
    expect(checkDelivery(evidence(base)).unexplainedDeadLetters).toHaveLength(1);
    const noCopy = { ...base.view, manifests: new Map([['A', [entry('y', 1)]]]) };
    expect(
      checkDelivery(evidence({ ...base, view: noCopy, unconfirmedBodies: ['chaos:1:y'] }))
        .unexplainedDeadLetters,
    ).toHaveLength(1);
  });

  it('a resolved settlement the head does not hold, or a head that changes, is a flip', () => {
    const records = [
      ...run('A', 0, ['x'], 'returned', 'mixed'),
      { ev: 'res', b: 'A', k: 'retry', i: 0, r: 'resolved', p: 1, t: 5 } as WorkerRecord,
    ];
    const v = checkDelivery(
      evidence({
        records,
        view: {
          heads: new Map([['A', head('A', { settled: { '0': 'a' } })]]),
          manifests: new Map([['A', [entry('x', 1)]]]),
          slots: new Map(),
        },
      }),
    );
    expect(v.flips).toHaveLength(1);
    expect(
      compareHeads(head('A', { settled: { '0': 'a' } }), head('A', { settled: { '0': 'r' } })),
    ).toHaveLength(1);
    expect(compareHeads(head('A', { outcome: 'threw' }), head('A', { outcome: 'returned' }))).toHaveLength(1);
    expect(compareHeads(head('A'), undefined)).toHaveLength(1);
    expect(compareHeads(head('A', { closed: false }), head('A', { settled: { '0': 'a' } }))).toEqual([]);
  });

  it('overlapping handlers beyond maxConcurrency are breaches; a hang ends at its last beat', () => {
    const records = [
      ...run('A', 0, ['x'], undefined, 'hang'),
      { ev: 'beat', b: 'A', p: 1, t: 500 } as WorkerRecord,
      ...run('B', 400, ['y'], 'returned'),
      ...run('C', 600, ['z'], 'returned'),
    ];
    const heads = new Map(['A', 'B', 'C'].map((b) => [b, head(b)]));
    const v = checkDelivery(evidence({ records, view: { heads, manifests: new Map(), slots: new Map() } }));
    expect(v.breaches).toHaveLength(1); // B overlaps A; C starts after A's last beat
  });

  it('attempts counted twice, a return claimed for a handler that threw, DL-08 acks are reported', () => {
    const records = [
      ...run('A', 0, ['x'], 'threw', 'throw'),
      ...run('B', 100, ['x'], 'returned', 'mixed'),
      { ev: 'res', b: 'B', k: 'retry', i: 0, r: 'backend_unavailable', p: 1, t: 105 } as WorkerRecord,
    ];
    const v = checkDelivery(
      evidence({
        maxRetries: 2,
        accepted: [{ id: 'x', seq: 0, body: 'chaos:1:x' }],
        records,
        view: {
          heads: new Map([
            ['A', head('A')],
            ['B', head('B')],
          ]),
          manifests: new Map([
            ['A', [entry('x', 1)]],
            ['B', [entry('x', 1)]],
          ]),
          slots: new Map(),
        },
      }),
    );
    expect(v.attemptAnomalies).toHaveLength(1);
    expect(v.wrongOutcome).toHaveLength(1);
    expect(v.unknownSettlementAcked).toHaveLength(1);
  });

  it('a schedule is a pure function of its seed', () => {
    expect(scheduleFor(42)).toEqual(scheduleFor(42));
    expect(scheduleFor(42)).not.toEqual(scheduleFor(43));
    const a = createRng(7);
    const b = createRng(7);
    expect(Array.from({ length: 5 }, () => a.next())).toEqual(Array.from({ length: 5 }, () => b.next()));
  });
});
