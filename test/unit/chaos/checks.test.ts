/**
 * The chaos suite's checkers (test/chaos/checks.ts) on hand-made evidence: each violation they
 * exist for is reported, so a green chaos run is not green because a checker cannot fail.
 */
import { describe, expect, it } from 'vitest';
import type { WorkerRecord } from '../../chaos/chaos-worker.ts';
import {
  checkDelivery,
  compareHeads,
  concurrencyBoundAt,
  concurrencyBoundOf,
  type DeliveryEvidence,
  mayBeTakenBack,
} from '../../chaos/checks.ts';
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

/**
 * One handler run of batch `b` at time `t` over `ids`, ended as `how` (undefined: never ended)
 * after `ms`; every message as attempt `a`.
 */
function run(
  b: string,
  t: number,
  ids: string[],
  how?: 'returned' | 'threw',
  mode = 'ok',
  q = 'q',
  { a = 1, ms = 10 }: { a?: number; ms?: number } = {},
) {
  const out: WorkerRecord[] = [{ ev: 'start', q, b, n: ids.length, p: 1, t }];
  ids.forEach((id, i) => {
    out.push({ ev: 'msg', q, b, i, id, a, body: `chaos:1:${id}`, p: 1, t });
  });
  out.push({ ev: 'mode', b, m: mode, p: 1, t });
  if (how) out.push({ ev: 'end', b, how, p: 1, t: t + ms });
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

  it('only an open, unsettled, undecided head may be taken back (a registration whose slot refused its mark)', () => {
    const open = { closed: false, outcome: undefined, applied: false };
    expect(mayBeTakenBack(head('A', open))).toBe(true);
    expect(mayBeTakenBack(head('A', { ...open, settled: { '0': 'a' } }))).toBe(false);
    expect(mayBeTakenBack(head('A', { ...open, all: 'a' }))).toBe(false);
    expect(mayBeTakenBack(head('A'))).toBe(false);
    expect(mayBeTakenBack(head('A', { ...open, closed: true }))).toBe(false);
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
            ['A', head('A', { settled: { '0': 'r' } })],
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

  it('DL-07 a copy delivered after the Host acknowledged the message is a duplicate, not a second count', () => {
    // A producer's send retried after a lost answer put two copies of x in the queue.
    const v = checkDelivery(
      evidence({
        maxRetries: 0,
        accepted: [{ id: 'x', seq: 0, body: 'chaos:1:x' }],
        records: [...run('A', 0, ['x'], 'returned'), ...run('B', 100, ['x'], 'returned')],
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
    expect([v.attemptAnomalies, v.beyondRetries, v.duplicates, v.acked]).toEqual([[], [], 1, 1]);
  });

  it('DL-07 a later copy of an acknowledged message may exhaust its own count; the same count going on is a conflict', () => {
    /** x acknowledged in A as attempt 1, then delivered with `later` attempts until exhausted. */
    const afterAck = (later: number[]) =>
      checkDelivery(
        evidence({
          maxRetries: 1,
          deadLetter: true,
          deadLetterQueue: 'dlq',
          accepted: [{ id: 'x', seq: 0, body: 'chaos:1:x' }],
          records: [
            ...run('A', 0, ['x'], 'returned'),
            ...later.flatMap((a, k) => run(`L${k}`, 100 * (k + 1), ['x'], 'threw', 'throw', 'q', { a })),
          ],
          deadLetterRecords: [
            { ev: 'start', q: 'dlq', b: 'D', n: 1, p: 1, t: 900 },
            { ev: 'msg', q: 'dlq', b: 'D', i: 0, id: 'new', a: 1, body: 'chaos:1:x', p: 1, t: 900 },
          ],
          view: {
            heads: new Map([
              ['A', head('A')],
              ...later.map((_, k) => [`L${k}`, head(`L${k}`, { outcome: 'threw' })] as [string, HeadItem]),
              ['D', head('D', { consumerUid: 'dc', queueUid: 'dlq' })],
            ]),
            manifests: new Map([
              ['A', [entry('x', 1)]],
              ...later.map((a, k) => [`L${k}`, [entry('x', a)]] as [string, ManifestItem[]]),
            ]),
            slots: new Map(),
          },
        }),
      );
    // A second copy (a producer's send retried after a lost answer), counted 1, 2 on its own.
    const copy = afterAck([1, 2]);
    expect([copy.conflicts, copy.unexplainedDeadLetters, copy.deadLetterCopies, copy.acked]).toEqual([
      [],
      [],
      1,
      1,
    ]);
    // The acknowledged count going on (2 after 1) is the Host retrying what it acknowledged.
    const goingOn = afterAck([2]);
    expect(goingOn.conflicts).toHaveLength(1);
    expect(goingOn.unexplainedDeadLetters).toHaveLength(1);
  });

  it('a schedule is a pure function of its seed', () => {
    expect(scheduleFor(42)).toEqual(scheduleFor(42));
    expect(scheduleFor(42)).not.toEqual(scheduleFor(43));
    const a = createRng(7);
    const b = createRng(7);
    expect(Array.from({ length: 5 }, () => a.next())).toEqual(Array.from({ length: 5 }, () => b.next()));
  });

  describe('DL-02 across maxConcurrency updates', () => {
    /** `n` handlers of 1 s from `from`, then one more starting at `t`. */
    const busy = (n: number, t: number, from = 0) => {
      const records = Array.from({ length: n }, (_, k) =>
        run(`R${k}`, from, [`r${k}`], 'returned', 'ok', 'q', { ms: 1_000 }),
      ).flat();
      records.push(...run('LATE', t, ['late'], 'returned'));
      const heads = new Map(
        [...Array.from({ length: n }, (_, k) => `R${k}`), 'LATE'].map((b) => [b, head(b)]),
      );
      return { records, view: { heads, manifests: new Map(), slots: new Map() } };
    };
    const lowered = [{ maxConcurrency: 10, acceptedAt: 100, succeededAt: 300 }];

    it('the bound is the old one before acceptance, the larger of both until success, the new one after', () => {
      expect(concurrencyBoundAt(30, lowered, 50)).toBe(30);
      expect(concurrencyBoundAt(30, lowered, 200)).toBe(30);
      expect(concurrencyBoundAt(30, lowered, 301)).toBe(10);
      const raised = [{ maxConcurrency: 40, acceptedAt: 100, succeededAt: 300 }];
      expect(concurrencyBoundAt(1, raised, 50)).toBe(1);
      expect(concurrencyBoundAt(1, raised, 200)).toBe(40);
      expect(concurrencyBoundAt(1, raised, 301)).toBe(40);
      // 1 → 40 → 1: the second update's window allows 40, its success brings 1 back.
      const both = [...raised, { maxConcurrency: 1, acceptedAt: 400, succeededAt: 500 }];
      expect(concurrencyBoundAt(1, both, 450)).toBe(40);
      expect(concurrencyBoundAt(1, both, 501)).toBe(1);
      // Never seen to succeed: the larger bound stays.
      expect(concurrencyBoundAt(30, [{ maxConcurrency: 10, acceptedAt: 100 }], 10_000)).toBe(30);
    });

    it('after a lowering succeeded, a handler that starts while the new maxConcurrency or more run is a breach, of any generation', () => {
      const after = checkDelivery(
        evidence({ maxConcurrency: 30, concurrencyUpdates: lowered, ...busy(20, 500) }),
      );
      expect(after.breaches).toHaveLength(1);
      expect(after.breaches[0]).toContain('21 > 10');
      // The same start while the update was pending, or with fewer running, is no breach.
      expect(
        checkDelivery(evidence({ maxConcurrency: 30, concurrencyUpdates: lowered, ...busy(20, 200) }))
          .breaches,
      ).toEqual([]);
      expect(
        checkDelivery(evidence({ maxConcurrency: 30, concurrencyUpdates: lowered, ...busy(9, 500) }))
          .breaches,
      ).toEqual([]);
      // Once they ended, the new bound has room again.
      expect(
        checkDelivery(evidence({ maxConcurrency: 30, concurrencyUpdates: lowered, ...busy(20, 1_500) }))
          .breaches,
      ).toEqual([]);
    });

    it('DL-02: a handler of the generation an update replaced, registered before the update took effect, may start after its success', () => {
      // Chaos seed 11: 15 handlers of generation 2 (maxConcurrency 30) run; the update to 10
      // (generation 3) succeeds at 300; a batch of generation 2 — registered while generation 2
      // was active, so before the update took effect — starts its handler at 310.
      const lowered3 = [{ maxConcurrency: 10, acceptedAt: 100, succeededAt: 300, generation: 3 }];
      const late = (generation: number) => {
        const e = busy(15, 310);
        e.view.heads.set('LATE', head('LATE', { generation }));
        return checkDelivery(evidence({ maxConcurrency: 30, concurrencyUpdates: lowered3, ...e })).breaches;
      };
      expect(late(2)).toEqual([]);
      // The same start by a batch of the new generation breaks the new bound.
      expect(late(3)).toHaveLength(1);
      expect(late(3)[0]).toContain('16 > 10');
      // Judged at the success at the earliest: an old batch never gets a bound below its start's.
      const raised = [{ maxConcurrency: 40, acceptedAt: 100, succeededAt: 300, generation: 2 }];
      expect(concurrencyBoundOf(1, raised, 500, 1)).toBe(40);
      expect(concurrencyBoundOf(30, lowered3, 310, 2)).toBe(30);
      expect(concurrencyBoundOf(30, lowered3, 310, 3)).toBe(10);
      expect(concurrencyBoundOf(30, lowered3, 310, undefined)).toBe(10);
    });

    it('before a raise was accepted the old bound holds; from acceptance the new one may be used', () => {
      const raised = [{ maxConcurrency: 40, acceptedAt: 100, succeededAt: 300 }];
      expect(
        checkDelivery(evidence({ maxConcurrency: 1, concurrencyUpdates: raised, ...busy(1, 50) })).breaches,
      ).toHaveLength(1);
      expect(
        checkDelivery(evidence({ maxConcurrency: 1, concurrencyUpdates: raised, ...busy(5, 150, 120) }))
          .breaches,
      ).toEqual([]);
    });
  });

  describe('DL-07 deliveries beyond 1 + maxRetries', () => {
    const twice = (attempts: [number, number], decided: [string, string], maxRetries = 1) =>
      checkDelivery(
        evidence({
          maxRetries,
          accepted: [{ id: 'x', seq: 0, body: 'chaos:1:x' }],
          records: [
            ...run('A', 0, ['x'], 'threw', 'throw', 'q', { a: attempts[0] }),
            ...run('B', 100, ['x'], 'threw', 'throw', 'q', { a: attempts[1] }),
          ],
          view: {
            heads: new Map([
              ['A', head('A', { outcome: 'threw', settled: { '0': decided[0] } })],
              ['B', head('B', { outcome: 'threw', settled: { '0': decided[1] } })],
            ]),
            manifests: new Map([
              ['A', [entry('x', attempts[0])]],
              ['B', [entry('x', attempts[1])]],
            ]),
            slots: new Map(),
          },
        }),
      );

    it('the same attempt delivered twice, or an attempt above 1 + maxRetries, is counted', () => {
      const repeated = twice([1, 1], ['r', 'r']);
      expect(repeated.excessDeliveries).toBe(1);
      expect(repeated.beyondRetries[0]).toMatch(/^x: delivered as attempts 1,1/);
      const above = twice([1, 2], ['r', 'r'], 0);
      expect(above.excessDeliveries).toBe(1);
      expect(above.beyondRetries).toHaveLength(1);
    });

    it('retries within 1 + maxRetries, and duplicates after the Host acknowledged, are not', () => {
      const retried = twice([1, 2], ['r', 'a']);
      expect([retried.excessDeliveries, retried.beyondRetries]).toEqual([0, []]);
      const duplicate = twice([1, 1], ['a', 'a']);
      expect([duplicate.excessDeliveries, duplicate.beyondRetries]).toEqual([0, []]);
    });
  });

  it('DL-03 a first settlement refused as already_settled is reported; a second call’s refusal is not', () => {
    const res = (b: string, k: 'ack' | 'ackAll', r: string, i?: number): WorkerRecord =>
      (i === undefined
        ? { ev: 'res', b, k, r, p: 1, t: 5 }
        : { ev: 'res', b, k, i, r, p: 1, t: 5 }) as WorkerRecord;
    const records = [
      ...run('A', 0, ['x', 'y'], 'returned', 'mixed'),
      res('A', 'ack', 'already_settled', 0),
      res('A', 'ack', 'resolved', 1),
      res('A', 'ack', 'already_settled', 1),
      ...run('B', 100, ['z'], 'returned', 'ackAll'),
      res('B', 'ackAll', 'already_settled'),
      ...run('C', 200, ['w'], 'returned', 'ackAll'),
      res('C', 'ackAll', 'resolved'),
      res('C', 'ack', 'already_settled', 0),
    ];
    const heads = new Map([
      ['A', head('A', { size: 2, settled: { '0': 'a', '1': 'a' } })],
      ['B', head('B', { all: 'a' })],
      ['C', head('C', { all: 'a' })],
    ]);
    const v = checkDelivery(evidence({ records, view: { heads, manifests: new Map(), slots: new Map() } }));
    expect(v.refusedFirstSettlements).toEqual([
      'A[0]: ack refused already_settled on its first call',
      'B: ackAll refused already_settled on its first call',
    ]);
  });

  it('the short profile keeps its schedules; full draws lost answers and maxConcurrency updates for some seeds', () => {
    const seeds = Array.from({ length: 60 }, (_, i) => i + 1);
    for (const seed of seeds) {
      const short = scheduleFor(seed, 'short');
      expect([short.updates, short.lostAnswers]).toEqual([[], false]);
      expect(short.steps.some((st) => st.kind === 'update')).toBe(false);
    }
    const full = seeds.map((seed) => scheduleFor(seed, 'full'));
    const withUpdates = full.filter((s) => s.updates.length > 0);
    const withLost = full.filter((s) => s.lostAnswers);
    expect(withUpdates.length).toBeGreaterThan(5);
    expect(withUpdates.length).toBeLessThan(50);
    expect(new Set(withUpdates.map((s) => s.updates.join('→')))).toEqual(new Set(['40→1', '1→40', '30→10']));
    for (const s of withUpdates) {
      expect(s.steps.filter((st) => st.kind === 'update').map((st) => st.maxConcurrency)).toEqual(s.updates);
      // The messages sent around the updates have plans and fit before the probe's sequence number.
      expect(s.plans).toHaveLength(s.messages);
      const sent = s.steps.flatMap((st) => (st.kind === 'send' ? st.seqs : []));
      expect(Math.max(...sent)).toBe(s.messages - 1);
    }
    expect(withLost.length).toBeGreaterThan(5);
    for (const s of withLost) {
      const faults = JSON.parse(s.faults ?? '{}');
      expect(faults.dynamodb.lostAnswer).toBeGreaterThan(0);
      expect(faults.sqs.lostAnswer).toBeGreaterThan(0);
      expect(faults.localInvoke).toMatchObject({ lambdaCutOff: true });
      expect(faults.localInvoke.overlap).toBeGreaterThan(0);
    }
    // Lost answers only where AWS faults are drawn at all.
    expect(full.filter((s) => s.lostAnswers && s.faults === undefined)).toEqual([]);
  });
});
