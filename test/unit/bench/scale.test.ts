import { describe, expect, it } from 'vitest';
import type { CaseSample, PhysicsCounts, ScaleSamples } from '../../../bench/scale/model.ts';
import { foldName, physicsDelta } from '../../../bench/scale/physics.ts';
import {
  awsRoundMs,
  caseFigures,
  hottestPartition,
  idleUsdPerConsumer,
  localLanes,
  roundAtTarget,
  sustainedWindow,
} from '../../../bench/scale/project.ts';
import { scaleSection } from '../../../bench/scale/render.ts';
import { scaleTargetRows } from '../../../bench/scale/targets.ts';

const TABLE = 'bench-0123abcd-0123-4567-89ab-0123456789ab';

const physics = (o: Partial<PhysicsCounts> = {}): PhysicsCounts => ({
  cancelledTransactions: 0,
  refusedWrites: 0,
  throttled: 0,
  conflictsByItem: {},
  partitions: [],
  lambdaThrottled: {},
  lambdaPeak: {},
  ...o,
});

const drain = (o: Partial<CaseSample> = {}): CaseSample => ({
  kind: 'drain',
  label: '(a) batch 10',
  ok: true,
  localLanes: 25,
  awsConcurrency: 250,
  batchSize: 10,
  messages: 1_000,
  delivered: 1_000,
  batches: 100,
  sustainedSeconds: 2,
  sustainedMessages: 800,
  windowSeconds: 10,
  physics: physics(),
  refusedCalls: {},
  roundMs: [40],
  roundCalls: [8],
  consumers: 1,
  warnings: {},
  ...o,
});

describe('scale bench projection', () => {
  it('runs maxConcurrency ÷ k lanes locally, at least one', () => {
    expect(localLanes(250, 10)).toBe(25);
    expect(localLanes(250, 1_000)).toBe(1);
  });

  it('takes the sustained rate between 10 % and 90 % of the messages', () => {
    const events: [number, number][] = Array.from({ length: 10 }, (_, i) => [i * 1000, 10]);
    // 10 % is reached at t = 0 (10 messages), 90 % at t = 8 s (90 messages).
    expect(sustainedWindow(events, 100)).toEqual({ messages: 80, seconds: 8 });
    expect(sustainedWindow([[0, 100]], 100)).toEqual({ messages: 0, seconds: 0 });
  });

  it('projects units a second × k and keeps the share of the limit as measured', () => {
    const p = physics({
      partitions: [
        { partition: 'DISPATCH#…', writeUnits: 500, readUnits: 0, throttles: 2 },
        { partition: 'QSTATE#…', writeUnits: 100, readUnits: 1_500, throttles: 0 },
      ],
    });
    const h = hottestPartition(p, 10, 10);
    // 50 WCU/s locally = 500 WCU/s on AWS = half of 1,000; the other: 100 + 1,500/3 of 3,000 = 60 %.
    expect(h?.partition).toBe('QSTATE#…');
    expect(h?.awsWcu).toBeCloseTo(100);
    expect(h?.awsRcu).toBeCloseTo(1_500);
    expect(h?.share).toBeCloseTo(0.6);
  });

  it('projects messages/s × k, and conflicts and throttles per 1,000 batches as counted', () => {
    const f = caseFigures(
      drain({ physics: physics({ cancelledTransactions: 3, refusedWrites: 1, throttled: 2 }) }),
      10,
    );
    expect(f.localPerSecond).toBe(400);
    expect(f.awsPerSecond).toBe(4_000);
    expect(f.conflictsPer1000).toBe(40);
    expect(f.throttlesPer1000).toBe(20);
  });

  it("takes a round's AWS time from its calls, as many consumers at once as the supervisor visits", () => {
    // One consumer: its 8 calls one after another; 1,000: 16 visited at once.
    expect(awsRoundMs(8, 1)).toBe(80);
    expect(awsRoundMs(8_000, 1_000)).toBe(5_000);
    expect(awsRoundMs(Number.NaN, 1)).toBeNaN();
  });

  it('prices the idle rounds per consumer-month and scales a round to 1,000 consumers', () => {
    const many = drain({
      kind: 'many',
      many: {
        consumers: 100,
        trickles: 10,
        trickleSent: 5,
        trickleDelivered: 5,
        idleRoundMs: [1_000],
        idleRoundCalls: [700],
        idleRoundsUsd: 0.0002,
        idleRounds: 2,
        setupSeconds: 10,
      },
    });
    expect(idleUsdPerConsumer(many)).toBeCloseTo((0.0001 * 43_200) / 100);
    // 700 calls over 100 consumers → 7,000 over 1,000, 16 at a time at 10 ms.
    expect(roundAtTarget({ ...many, consumers: 100 })).toBeCloseTo(4_375);
  });
});

describe('scale bench physics counts', () => {
  it('drops the case table from names and folds ids', () => {
    expect(foldName(`${TABLE}:DISPATCH#c_0123456789abcdef0123`)).toBe('DISPATCH#…');
    expect(foldName(`${TABLE}/gsi1:RECENT#c_0123456789abcdef0123`)).toBe('/gsi1:RECENT#…');
    expect(foldName(`${TABLE}:ATTACH#c_0123456789abcdef0123 / _`)).toBe('ATTACH#… / _');
  });

  it('counts only what happened between two snapshots', () => {
    const snap = (units: number, conflicts: number, throttled: number) => ({
      dynamo: {
        cancelledTransactions: conflicts,
        refusedWrites: 0,
        throttled,
        conflictsByItem: { [`${TABLE}:ATTACH#c_0123456789abcdef0123 / _`]: conflicts },
        partitions: [
          {
            partition: `${TABLE}:DISPATCH#c_0123456789abcdef0123`,
            writeUnits: units,
            readUnits: 0,
            throttles: 0,
            seconds: 1,
          },
          { partition: `${TABLE}:RES#setup`, writeUnits: 7, readUnits: 0, throttles: 0, seconds: 1 },
        ],
      },
      throttled: { worker: throttled, step: 0 },
      starts: {
        admitted: { standard: units, express: 0 },
        throttled: { standard: 0, express: throttled },
        failed: { standard: 0, express: conflicts },
      },
    });
    const d = physicsDelta(snap(10, 1, 0), snap(30, 4, 2), { worker: 3 });
    expect(d.cancelledTransactions).toBe(3);
    expect(d.throttled).toBe(2);
    expect(d.conflictsByItem).toEqual({ 'ATTACH#… / _': 3 });
    expect(d.partitions).toEqual([{ partition: 'DISPATCH#…', writeUnits: 20, readUnits: 0, throttles: 0 }]);
    expect(d.lambdaThrottled).toEqual({ worker: 2 });
    expect(d.startsThrottled).toEqual({ express: 2 });
    expect(d.startsFailed).toBe(3);
  });
});

describe('scale bench targets', () => {
  const samples = (cases: CaseSample[]): ScaleSamples => ({
    config: {
      mode: 'quick',
      k: 10,
      transactionMs: 10,
      drains: [],
      many: {
        consumers: 100,
        trickles: 10,
        trickleRate: 1,
        hot: { awsConcurrency: 250, batchSize: 10, messages: 100, handlerMs: 10 },
        idleRounds: 1,
        loadRounds: 1,
        timeoutMs: 1,
      },
      storm: { awsConcurrency: 250, batchSize: 10, messages: 10, handlerMs: 0, maxRetries: 3, timeoutMs: 1 },
    },
    cases,
    errors: [],
  });

  it('meets a drain with no hot partition and no refusals', () => {
    const c = drain({
      sustainedMessages: 1_000,
      sustainedSeconds: 1,
      physics: physics({
        partitions: [{ partition: 'DISPATCH#…', writeUnits: 100, readUnits: 0, throttles: 0 }],
      }),
    });
    const rows = scaleTargetRows(samples([c]));
    expect(rows.map((r) => r.verdict)).toEqual(['met', 'met', 'met']);
    expect(rows.every((r) => r.why === '')).toBe(true);
  });

  it('explains a miss by the item, the call and the counts', () => {
    const c = drain({
      physics: physics({
        cancelledTransactions: 5,
        conflictsByItem: { 'ATTACH#… / _': 5 },
        partitions: [{ partition: 'ATTACH#…', writeUnits: 900, readUnits: 0, throttles: 4 }],
      }),
      refusedCalls: { 'batch-host:register DynamoDB:TransactWriteItems': 5 },
    });
    const rows = scaleTargetRows(samples([c]));
    expect(rows.map((r) => r.verdict)).toEqual(['missed', 'missed', 'missed']);
    const why = rows[1]?.why ?? '';
    expect(why).toContain('`ATTACH#…` at 900 WCU/s');
    expect(why).toContain('`ATTACH#… / _` 5');
    expect(why).toContain('`batch-host:register DynamoDB:TransactWriteItems` 5');
  });

  it('says a rate no scaled limit bounded is a lower bound, and one a limit bounded is not', () => {
    const quiet = drain({
      sustainedMessages: 100,
      sustainedSeconds: 1,
      batches: 100,
      physics: physics({
        partitions: [{ partition: 'DISPATCH#…', writeUnits: 20, readUnits: 0, throttles: 0 }],
      }),
    });
    const [rate] = scaleTargetRows(samples([quiet]));
    expect(rate?.verdict).toBe('missed');
    expect(rate?.why).toContain('no scaled limit bounded it');
    expect(rate?.why).toContain('lower bound');
    const throttled = drain({
      sustainedMessages: 100,
      sustainedSeconds: 1,
      batches: 100,
      physics: physics({
        throttled: 3,
        partitions: [{ partition: 'DISPATCH#…', writeUnits: 20, readUnits: 0, throttles: 3 }],
      }),
    });
    const [limited] = scaleTargetRows(samples([throttled]));
    expect(limited?.why).not.toContain('lower bound');
    expect(limited?.why).toContain('3 DynamoDB throttles');
  });

  it('misses a storm that lost a message or failed a finalisation, and renders each miss', () => {
    const storm = drain({
      kind: 'storm',
      label: '(c) storm',
      messages: 10,
      storm: {
        maxRetries: 3,
        deliveries: 40,
        deadLettered: 9,
        failedFinalisations: 1,
        lanesFailed: 0,
        recoveries: 0,
      },
    });
    const rows = scaleTargetRows(samples([storm]));
    expect(rows[1]).toMatchObject({ value: '1, 0, 1', verdict: 'missed' });
    const md = scaleSection(samples([storm])).join('\n');
    expect(md).toContain(
      '| (c) storm: failed finalisations, lanes failed or cut off, messages lost | 0, 0, 0 | 1, 0, 1 | **missed** |',
    );
    expect(md).toContain('### Why each scale target was missed');
    expect(md).toContain('Not captured');
  });
});
