/**
 * The arithmetic of the cost by traffic shape, on hand-made counts: the sparse rates composed
 * from the two episodes, Lambda with an SQS event source mapping from the price table, the
 * targets' judgement, the window's cut of running durations, and the page region. Nothing here
 * runs the bench or times anything that matters.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it, vi } from 'vitest';
import { isDelivery } from '../../../bench/per-batch.ts';
import { type CostBreakdown, PRICES, usd } from '../../../bench/pricing.ts';
import { replaceCostsRegion, SHAPES_END, SHAPES_MARKERS, SHAPES_START } from '../../../bench/readme-costs.ts';
import { summarise } from '../../../bench/report.ts';
import type { BenchConfig, BenchMeta, BenchSamples } from '../../../bench/results-model.ts';
import { renderShapesChart } from '../../../bench/shapes/chart.ts';
import {
  composeTrickle,
  countsOf,
  episodeOf,
  idleSecondUsd,
  judgeShape,
  lambdaEsm,
  messagesPerBatch,
  receivesBound,
  shapeTarget,
} from '../../../bench/shapes/compose.ts';
import { SHAPES_QUICK } from '../../../bench/shapes/configs.ts';
import { shapeMisses } from '../../../bench/shapes/misses.ts';
import type { ShapesSamples, StreamSample } from '../../../bench/shapes/model.ts';
import { shapesRegion, shapesSection } from '../../../bench/shapes/render.ts';
import { rateLabel, shapeRows, summariseShapes } from '../../../bench/shapes/summarise.ts';
import { LAMBDA_PLATFORM_LOG_BYTES, Meter, type Tally } from '../../../bench/support/meter.ts';
import { OpenSpans } from '../../../bench/support/open-spans.ts';
import { writeResults } from '../../../bench/write-results.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');

const sdk = (calls: number, wru = 0, rru = 0) => ({ calls, errors: 0, rru, wru, refusedWrites: 0 });

/**
 * A lane's life as the meter counts it: `messages` sends (each an SQS send and a 1 WRU wake
 * count), one batch each (register and finalize, 13 WRU), the worker invocation running
 * `workerSeconds` and the Express execution `laneSeconds`.
 */
function laneTally(o: {
  messages: number;
  workerSeconds: number;
  laneSeconds: number;
  lanes?: number;
}): Tally {
  const n = o.messages;
  const lanes = o.lanes ?? 1;
  return {
    sdk: {
      producer: { 'SQS:SendMessage': sdk(n), 'DynamoDB:UpdateItem': sdk(n, n) },
      'worker:InvokeWorker': { 'SQS:ReceiveMessage': sdk(3 * n), 'SQS:DeleteMessageBatch': sdk(n) },
      'batch-host:register': { 'DynamoDB:TransactWriteItems': sdk(n, 9 * n, n) },
      'batch-host:finalize': { 'DynamoDB:UpdateItem': sdk(2 * n, 4 * n) },
      setup: { 'DynamoDB:PutItem': sdk(50, 50) },
    },
    lambda: {
      'worker:InvokeWorker': {
        invocations: lanes,
        totalMs: o.workerSeconds * 1000,
        billedMs: o.workerSeconds * 1000,
      },
      'batch-host:register': { invocations: n, totalMs: 10 * n, billedMs: 10 * n },
      'batch-host:finalize': { invocations: n, totalMs: 10 * n, billedMs: 10 * n },
      'step:AcquireSlot': { invocations: 2 * lanes, totalMs: 20, billedMs: 20 },
    },
    logs: { 'worker:InvokeWorker': 600, 'batch-host:register': 300 * n },
    transitions: { AcquireSlot: 2, SlotTaken: 1, InvokeWorker: 1, LaneDone: 1 },
    executions: lanes,
    express: { executions: lanes, transitions: 5, billedMs: o.laneSeconds * 1000 },
  };
}

const ISOLATED = { messages: 1, workerSeconds: 25, laneSeconds: 26 };
const KEPT_ALIVE = { messages: 3, workerSeconds: 45, laneSeconds: 46 };

const episodes = () => ({
  isolated: episodeOf(laneTally(ISOLATED), { messages: 1, gapSeconds: 0, seconds: 26 }),
  keptAlive: episodeOf(laneTally(KEPT_ALIVE), { messages: 3, gapSeconds: 10, seconds: 46 }),
});

const close = (a: CostBreakdown, b: CostBreakdown) => {
  for (const k of Object.keys(a) as (keyof CostBreakdown)[]) expect(a[k], k).toBeCloseTo(b[k], 12);
};

describe('counts per message from a tally', () => {
  it('bills each function at its memory and keeps the producer’s writes apart', () => {
    const c = countsOf(laneTally(ISOLATED));
    expect(c.gbSeconds.worker).toBeCloseTo(25 * 0.5, 9);
    expect(c.gbSeconds.batchHost).toBeCloseTo(0.02 * (PRICES.lambdaMemoryMb.batchHost / 1024), 9);
    expect(c.wruProducer).toBe(1);
    expect(c.wruDelivery).toBe(13);
    expect(c.sqsRequests).toBe(5);
    expect(c.laneStarts).toBe(1);
    expect(c.expressSeconds).toBe(26);
    // The setup's writes are no message's.
    expect(c.wruProducer + c.wruDelivery).toBe(14);
  });
});

describe('the sparse rates, composed from the episodes', () => {
  const { isolated, keptAlive } = episodes();

  it('one a minute: the lane a message wakes has ended before the next, so each message is the isolated episode', () => {
    const c = composeTrickle(60, isolated, keptAlive);
    expect(c.how).toBe('isolated');
    close(c.usd, isolated.usd);
    expect(c.counts.laneStarts).toBe(1);
  });

  it('one every 10 s: what each further message added to the kept-alive lane, at its own gap', () => {
    const c = composeTrickle(10, isolated, keptAlive);
    expect(c.how).toBe('kept alive');
    const expected = Object.fromEntries(
      Object.keys(isolated.usd).map((k) => [
        k,
        (keptAlive.usd[k as keyof CostBreakdown] - isolated.usd[k as keyof CostBreakdown]) / 2,
      ]),
    ) as unknown as CostBreakdown;
    close(c.usd, expected);
    // 20 s more of the worker over two more messages: 10 s each, 5 GB-s at 512 MB.
    expect(c.counts.gbSeconds.worker).toBeCloseTo(5, 9);
    expect(c.counts.laneStarts).toBe(0);
    expect(c.counts.wruDelivery).toBe(13);
  });

  it('a gap other than the one measured stretches the lane’s wait at the price of a second of it', () => {
    const at10 = composeTrickle(10, isolated, keptAlive);
    const at15 = composeTrickle(15, isolated, keptAlive);
    const second = idleSecondUsd(true);
    expect(second.lambdaDuration).toBeCloseTo(0.5 * PRICES.lambdaArm64PerGbSecond, 15);
    expect(at15.usd.lambdaDuration - at10.usd.lambdaDuration).toBeCloseTo(5 * second.lambdaDuration, 15);
    expect(at15.usd.stepFunctions - at10.usd.stepFunctions).toBeCloseTo(5 * second.stepFunctions, 15);
    expect(at15.usd.total - at10.usd.total).toBeCloseTo(
      5 * (second.lambdaDuration + second.stepFunctions),
      15,
    );
    expect(at15.counts.expressSeconds - at10.counts.expressSeconds).toBeCloseTo(5, 9);
    // A gap as long as the isolated episode is isolated again.
    expect(composeTrickle(26, isolated, keptAlive).how).toBe('isolated');
  });
});

describe('Lambda with an SQS event source mapping, from the price table', () => {
  it('batches as the consumer does: the first message opens the 5 s window, up to 100', () => {
    expect(messagesPerBatch(1 / 60, 100, 5)).toBe(1);
    expect(messagesPerBatch(0.1, 100, 5)).toBe(1);
    expect(messagesPerBatch(0.2, 100, 5)).toBe(2);
    expect(messagesPerBatch(1, 100, 5)).toBe(6);
    expect(messagesPerBatch(10, 100, 5)).toBe(51);
    expect(messagesPerBatch(100, 100, 5)).toBe(100);
  });

  const a = { maxBatchSize: 100, windowSeconds: 5, handlerMs: 0.02 };
  const logPerInvocation = (LAMBDA_PLATFORM_LOG_BYTES / 1024 ** 3) * PRICES.cloudwatchLogsPerGbIngested * 1e6;
  const oneMs = 0.001 * 0.5 * PRICES.lambdaArm64PerGbSecond * 1e6;

  it('a message alone: a send, a receive and a delete, and a Lambda request of its own', () => {
    const e = lambdaEsm(1 / 60, a);
    expect(e.messagesPerBatch).toBe(1);
    expect(e.sqsRequestsPerMessage).toBe(3);
    expect(e.sqs).toBeCloseTo(1.2, 12);
    expect(e.lambdaRequests).toBeCloseTo(0.2, 12);
    expect(e.lambdaDuration).toBeCloseTo(oneMs, 12);
    expect(e.logs).toBeCloseTo(logPerInvocation, 12);
    expect(e.total).toBeCloseTo(1.4 + oneMs + logPerInvocation, 12);
  });

  it('a full batch of 100: ten receives and ten deletes shared by the batch', () => {
    const e = lambdaEsm(1_000, a);
    expect(e.sqsRequestsPerMessage).toBeCloseTo(1.2, 12);
    expect(e.sqs).toBeCloseTo(0.48, 12);
    expect(e.lambdaRequests).toBeCloseTo(0.002, 12);
    expect(e.lambdaDuration).toBeCloseTo(oneMs / 100, 12);
  });

  it('bills the handler’s time in whole milliseconds, one at least', () => {
    expect(lambdaEsm(1, { ...a, handlerMs: 2.3 }).lambdaDuration).toBeCloseTo((3 * oneMs) / 6, 12);
    expect(lambdaEsm(1, a).sqsRequestsPerMessage).toBeCloseTo(1 + 2 / 6, 12);
  });
});

describe('receives where a message ends one waiting poll', () => {
  it('bounds them at one a message and one a batch, and never raises a lower count', () => {
    expect(receivesBound(8.05, 68.2)).toBeCloseTo(1 + 1 / 68.2, 12);
    expect(receivesBound(0.92, 100)).toBe(0.92);
    expect(receivesBound(3, 1)).toBe(2);
  });
});

describe('the shape targets', () => {
  it('a message a second and more: Cloudflare’s price and 3× the event source mapping, both', () => {
    const t = shapeTarget(1);
    expect(t).toEqual({ usd: 1.2, esmRatio: 3 });
    expect(judgeShape(1.0, 0.5, t)).toBe('met');
    expect(judgeShape(1.0, 0.3, t)).toBe('missed');
    expect(judgeShape(1.3, 1.0, t)).toBe('missed');
    expect(judgeShape(Number.NaN, 1.0, t)).toBe('—');
  });

  it('below a message a second: $10 per million, whatever the mapping costs', () => {
    const t = shapeTarget(0.1);
    expect(t).toEqual({ usd: 10 });
    expect(judgeShape(9.9, 0.1, t)).toBe('met');
    expect(judgeShape(10.1, 100, t)).toBe('missed');
  });
});

describe('a window cut out of a stream', () => {
  it('bills a running span up to the cut, and the rest at its end', () => {
    const spans = new OpenSpans();
    const id = spans.start('worker:InvokeWorker', 1_000);
    expect(spans.cut(1_400)).toEqual([{ key: 'worker:InvokeWorker', ms: 400 }]);
    expect(spans.cut(1_500)).toEqual([{ key: 'worker:InvokeWorker', ms: 100 }]);
    expect(spans.end(id)).toBe(500);
    expect(spans.cut(2_000)).toEqual([]);
    expect(spans.end(undefined)).toBe(0);
  });

  it('the meter splits an invocation and an Express execution across the cut, and loses none of either', () => {
    const meter = new Meter();
    const t0 = performance.now();
    const worker = meter.lambdaStarted('worker:InvokeWorker');
    const lane = meter.executionStarted(true);
    while (performance.now() - t0 < 3) {
      // a few milliseconds for the cut to bill
    }
    const before = meter.cut();
    // The invocation's duration as its caller measures it, from before its start: never less than
    // what the cut billed, however long a loaded machine took to get here.
    const duration = performance.now() - t0 + 50;
    meter.lambdaEnded('worker:InvokeWorker', duration, worker);
    meter.expressEnded(1_234, lane);
    const after = meter.reset();
    const w = (t: Tally) => t.lambda['worker:InvokeWorker']?.billedMs ?? 0;
    expect(w(before)).toBeGreaterThan(2);
    expect(w(before) + w(after)).toBeCloseTo(Math.ceil(duration), 9);
    expect(before.lambda['worker:InvokeWorker']?.invocations).toBe(1);
    expect(after.lambda['worker:InvokeWorker']?.invocations).toBe(0);
    expect((before.express?.billedMs ?? 0) + (after.express?.billedMs ?? 0)).toBeCloseTo(1_300, 9);
  });

  it('without a cut, a duration is billed whole where it ends, as before', () => {
    const meter = new Meter();
    const span = meter.lambdaStarted('batch-host:register');
    expect(meter.reset().lambda['batch-host:register']?.billedMs).toBe(0);
    meter.lambdaEnded('batch-host:register', 7.2, span);
    expect(meter.reset().lambda['batch-host:register']?.billedMs).toBe(8);
  });
});

/** A stream of `rate` a second whose window counted `lanes` lanes over `sent` messages. */
function stream(rate: number, sent: number, windowSeconds: number): StreamSample {
  const tally = laneTally({ messages: sent, workerSeconds: windowSeconds, laneSeconds: windowSeconds });
  return {
    rate,
    host: {
      ok: true,
      windowSeconds,
      delivered: sent,
      perSecond: sent / windowSeconds,
      batches: sent / 5,
      batchMessages: sent,
      sentInWindow: sent,
      producer: { sent, failed: 0, maxLagMs: 3 },
      handlerMs: [0.02, 0.03],
      tally,
      tail: { tally: laneTally(ISOLATED), seconds: 25, lanes: 1, ended: true },
    } as unknown as StreamSample['host'],
  };
}

const samples = (): ShapesSamples => ({
  config: SHAPES_QUICK,
  streams: [stream(1, 12, 12)],
  isolated: {
    ok: true,
    messages: 1,
    gapSeconds: 0,
    seconds: 26,
    tally: laneTally(ISOLATED),
    handlerMs: [0.02],
  },
  keptAlive: {
    ok: true,
    messages: 3,
    gapSeconds: 10,
    seconds: 46,
    tally: laneTally(KEPT_ALIVE),
    handlerMs: [0.02],
  },
  errors: [],
});

describe('a run’s figures', () => {
  const s = summariseShapes(samples());

  it('orders the rates, composes the sparse ones and prices the streams per message sent in the window', () => {
    expect(s.figures.map((f) => [f.label, f.how])).toEqual([
      ['1 a minute', 'isolated'],
      ['1 every 10 s', 'kept alive'],
      ['1 a second', 'stream'],
    ]);
    const { isolated } = episodes();
    expect(s.figures[0]?.perMillion.total).toBeCloseTo(isolated.usd.total * 1e6, 6);
    const streamUsd = usd(samples().streams[0]!.host.tally, isDelivery).total;
    expect(s.figures[2]?.perMillion.total).toBeCloseTo((streamUsd * 1e6) / 12, 6);
    expect(s.figures[2]?.tail?.lanes).toBe(1);
    expect(s.handlerMs).toBeCloseTo(0.02, 9);
  });

  it('judges every figure and explains each miss from its counts, the largest part first', () => {
    for (const f of s.figures) expect(f.verdict).toBe(f.perMillion.total <= f.target.usd ? 'met' : 'missed');
    const misses = shapeMisses(s);
    expect(misses.length).toBe(s.figures.filter((f) => f.verdict === 'missed').length);
    expect(misses[0]).toMatch(
      /^\*\*1 a minute \(composed: isolated\): \$[\d,.]+ per million against ≤ \$10\.00 — missed\.\*\*/,
    );
    expect(misses[0]).toContain('Lambda duration');
    expect(misses[0]).toMatch(/worker invocations 12\.5\d* GB-s a message/);
    expect(shapeRows(s).map((r) => r.key)).toEqual([
      'shape:1 a minute',
      'shape:1 every 10 s',
      'shape:1 a second',
    ]);
  });

  it('writes a region whose cells fit the docs, between markers the costs page carries once', () => {
    const meta = { date: '2026-12-05', commit: 'abc1234' } as BenchMeta;
    const region = shapesRegion(meta, s, { results: 'r.md', chart: 'r.png' }, 'npm run bench');
    for (const f of s.figures) expect(region).toContain(`| ${f.label}`);
    expect(region).toContain('![USD per million messages vs arrival rate](r.png)');
    const cells = region
      .split('\n')
      .filter((l) => l.startsWith('|'))
      .flatMap((l) => l.split('|'));
    expect(Math.max(...cells.map((c) => c.trim().length))).toBeLessThanOrEqual(300);
    const page = readFileSync(path.join(root, 'docs/costs.md'), 'utf8');
    const rewritten = replaceCostsRegion(page, region, SHAPES_MARKERS);
    expect(rewritten).toContain(`${SHAPES_START}\n${region}\n${SHAPES_END}`);
    expect(replaceCostsRegion(rewritten, region, SHAPES_MARKERS)).toBe(rewritten);
    expect(shapesSection(s, 'c.png').join('\n')).toContain('## Cost by traffic shape');
  });

  it('draws the chart as a PNG', () => {
    const png = renderShapesChart(s, 'test');
    expect(png.subarray(1, 4).toString('ascii')).toBe('PNG');
  });

  it('names the rates as people say them', () => {
    expect([1 / 60, 0.1, 1, 1_000].map(rateLabel)).toEqual([
      '1 a minute',
      '1 every 10 s',
      '1 a second',
      '1,000 a second',
    ]);
  });
});

describe('a full run that measured the shapes', () => {
  const saved = JSON.parse(
    readFileSync(path.join(root, 'test/unit/bench/fixtures/results-2026-12-01.json'), 'utf8'),
  ) as {
    meta: BenchMeta;
    config: BenchConfig;
    samples: BenchSamples;
  };
  const run = { ...saved.samples, shapes: samples() };

  it('adds a row per rate to the results table, judged with the rest', () => {
    const summary = summarise(saved.config, run);
    const rows = summary.rows.filter((r) => r.key?.startsWith('shape:'));
    expect(rows.map((r) => r.setting)).toEqual([
      '1 a minute (composed: isolated)',
      '1 every 10 s (composed: kept alive)',
      '1 a second',
    ]);
    expect(summary.shapes?.figures).toHaveLength(3);
  });

  it('writes the section, the chart and both regions of the page, and nothing outside them', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'bench-shapes-'));
    // The run prints its results table; this test reads the files instead.
    const printed = vi.spyOn(process.stdout, 'write').mockImplementation(() => true);
    try {
      const page = path.join(dir, 'costs.md');
      writeFileSync(
        page,
        `# C\n<!-- bench:costs:start -->\nold\n<!-- bench:costs:end -->\nmiddle\n${SHAPES_START}\nold\n${SHAPES_END}\nend\n`,
      );
      const out = path.join(dir, 'results');
      const meta = { ...saved.meta, date: '2026-12-05' };
      const code = writeResults(
        meta,
        { ...saved.config, mode: 'full' },
        { ...run, errors: [] },
        { dir: out, costsPage: page },
      );
      expect(code).toBe(0);
      expect(existsSync(path.join(out, '2026-12-05-rates.png'))).toBe(true);
      expect(readFileSync(path.join(out, '2026-12-05.md'), 'utf8')).toContain('## Cost by traffic shape');
      const text = readFileSync(page, 'utf8');
      expect(text).toContain('![USD per million messages vs arrival rate](results/2026-12-05-rates.png)');
      expect(text).toContain('\nmiddle\n');
      expect(text.endsWith(`${SHAPES_END}\nend\n`)).toBe(true);
    } finally {
      printed.mockRestore();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
