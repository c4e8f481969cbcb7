/**
 * Turns raw samples into the summary (medians with min and max over runs), the met/missed
 * verdicts against the issue's targets, the Markdown report and the console table. Every number
 * here is computed from the samples of this run; the only outside inputs are the prices.
 */
import { type CostBreakdown, PRICE_SOURCES, PRICES, scale, transitionsOf, usd } from './pricing.ts';
import type { BenchConfig, BenchMeta, BenchSamples, ThroughputPair } from './results-model.ts';
import { percentiles } from './scenarios/latency.ts';
import { addTallies, type SdkTally, sumSdk, type Tally } from './support/meter.ts';
import { type Spread, spread } from './support/stats.ts';

/** Contexts whose calls are not part of delivering messages (setup, local-only polling). */
const NOT_DELIVERY = new Set(['setup', 'control-plane', 'teardown', 'supervisor']);
export const isDelivery = (context: string) => !NOT_DELIVERY.has(context);

export const MINUTES_PER_MONTH = 30 * 24 * 60;

export type Verdict = 'met' | 'missed' | '—';

export interface Row {
  group: string;
  figure: string;
  setting: string;
  unit: string;
  host: Spread;
  baselineLabel?: string;
  baseline?: Spread;
  ratio?: Spread;
  target?: string;
  verdict: Verdict;
  digits: number;
}

export interface CellCost {
  cell: string;
  batchSize: number;
  concurrency: number;
  perMillion: Spread;
  breakdown: CostBreakdown;
  transitionsPerBatch: Spread;
  lambdaPerBatch: Spread;
  dynamoCallsPerBatch: Spread;
  sqsPerMessage: Spread;
  rruPerMessage: Spread;
  wruPerMessage: Spread;
  tailPerLane: { transitions: number; lambda: number; sqs: number; dynamoCalls: number };
  /** Drain SDK calls of all runs by context and operation, and the batches they delivered. */
  ops: Record<string, Record<string, SdkTally>>;
  batches: number;
}

export interface Summary {
  rows: Row[];
  costs: CellCost[];
  perBatchOps: { cell: string; batches: number; ops: Record<string, Record<string, SdkTally>> } | undefined;
  /** The producer's calls per 100 messages sent (sendBatch of 100), from the pre-fills. */
  producerPer100: Record<string, { calls: number; wru: number }>;
  utilisationDetail:
    | { meanHandlerMs: Spread; meanSlotMs: Spread; peakHandlers: number; maxConcurrency: number }
    | undefined;
  idle: {
    hostWithOneIdleConsumer: Spread;
    perExtraConsumer: Spread;
    /** Monthly USD by part: a Host with one idle consumer, and what one more adds. */
    breakdownOne: CostBreakdown;
    breakdownExtra: CostBreakdown;
    perRound: Record<string, number>;
    marginalPerRound: Record<string, number>;
    roundMs: Spread;
    laneEnd?: {
      idleWaitSeconds: number;
      transitions: number;
      lambda: number;
      sqs: number;
      usd: number;
      gbSeconds: number;
    };
  };
  throughputRatioAt: Spread | undefined;
  /** The per-run ratios behind it. */
  throughputRatiosAt: number[];
  /** SDK calls the Host made per settlement call (mean over the settle-latency runs). */
  callsPerSettle: Record<string, number>;
}

const cellKey = (b: number, c: number) => `batch ${b} / concurrency ${c}`;

function judge(value: number, ok: (v: number) => boolean): Verdict {
  return Number.isFinite(value) ? (ok(value) ? 'met' : 'missed') : '—';
}

function okPairs(pairs: ThroughputPair[]) {
  return pairs.filter((p) => p.host.ok && p.baseline.ok);
}

function costOfPair(p: ThroughputPair) {
  const all = addTallies([p.host.prefill, p.host.drain]);
  const total = usd(all, isDelivery);
  const perMillion = scale(total, 1e6 / Math.max(1, p.host.delivered));
  const sdk = sumSdk(all, isDelivery);
  const lambda = Object.values(p.host.drain.lambda).reduce((a, l) => a + l.invocations, 0);
  return {
    perMillion,
    transitionsPerBatch: transitionsOf(p.host.drain) / Math.max(1, p.host.batches),
    lambdaPerBatch: lambda / Math.max(1, p.host.batches),
    dynamoCallsPerBatch: sumSdk(p.host.drain, isDelivery).dynamoCalls / Math.max(1, p.host.batches),
    sqsPerMessage: sdk.sqsRequests / Math.max(1, p.host.delivered),
    rruPerMessage: sdk.rru / Math.max(1, p.host.delivered),
    wruPerMessage: (sdk.wru + sdk.refusedWrites) / Math.max(1, p.host.delivered),
  };
}

function medianBreakdown(list: CostBreakdown[]): CostBreakdown {
  const keys = [
    'sqs',
    'dynamoWrites',
    'dynamoReads',
    'stepFunctions',
    'lambdaRequests',
    'lambdaDuration',
    'cloudwatch',
    'total',
  ] as const;
  const out = {} as CostBreakdown;
  for (const k of keys) out[k] = spread(list.map((b) => b[k])).median;
  return out;
}

export function summarise(config: BenchConfig, s: BenchSamples): Summary {
  const rows: Row[] = [];
  const costs: CellCost[] = [];
  let throughputRatioAt: Spread | undefined;
  let throughputRatiosAt: number[] = [];

  // --- throughput --------------------------------------------------------------------------
  for (const cell of config.cells) {
    const pairs = okPairs(
      s.throughput.filter(
        (p) => p.cell.batchSize === cell.batchSize && p.cell.concurrency === cell.concurrency,
      ),
    );
    const ratio = spread(pairs.map((p) => p.host.perSecond / p.baseline.perSecond));
    const targeted = cell.batchSize === 100 && cell.concurrency === 10;
    if (targeted) {
      throughputRatioAt = ratio;
      throughputRatiosAt = pairs.map((p) => p.host.perSecond / p.baseline.perSecond);
    }
    rows.push({
      group: 'Throughput',
      figure: 'messages/s, no-op worker',
      setting: `${cellKey(cell.batchSize, cell.concurrency)}, ${cell.messages} msgs`,
      unit: 'msg/s',
      host: spread(pairs.map((p) => p.host.perSecond)),
      baselineLabel: 'raw receive+delete loop',
      baseline: spread(pairs.map((p) => p.baseline.perSecond)),
      ratio,
      target: targeted ? 'Host ÷ baseline ≥ 0.7' : undefined,
      verdict: targeted ? judge(ratio.median, (v) => v >= 0.7) : '—',
      digits: 0,
    });
  }

  // --- utilisation -------------------------------------------------------------------------
  const u = s.utilisation.filter((x) => x.ok);
  if (u.length > 0) {
    const first = u[0]!;
    const setting = `concurrency ${first.maxConcurrency}, batch ${first.batchSize}, handler 50 ± 40 ms`;
    const handlers = spread(u.map((x) => x.handlerUtilisation));
    const slots = spread(u.map((x) => x.slotUtilisation));
    rows.push({
      group: 'Utilisation',
      figure: 'running handlers ÷ maxConcurrency',
      setting,
      unit: '',
      host: handlers,
      target: '≥ 0.9',
      verdict: judge(handlers.median, (v) => v >= 0.9),
      digits: 2,
    });
    rows.push({
      group: 'Utilisation',
      figure: 'slots held ÷ maxConcurrency',
      setting,
      unit: '',
      host: slots,
      target: '≥ 0.9',
      verdict: judge(slots.median, (v) => v >= 0.9),
      digits: 2,
    });
  }

  // --- latency -----------------------------------------------------------------------------
  const settle = s.settle.filter((x) => x.ok);
  const latencyRows = (
    figure: string,
    setting: string,
    runs: { host: number[]; bare: number[] }[],
    target?: { p99Ratio: number },
  ) => {
    for (const q of ['p50', 'p99'] as const) {
      const host = spread(runs.map((r) => percentiles(r.host)[q]));
      const bare = spread(runs.map((r) => percentiles(r.bare)[q]));
      const ratio = spread(runs.map((r) => percentiles(r.host)[q] / percentiles(r.bare)[q]));
      const targeted = target && q === 'p99';
      rows.push({
        group: 'Latency',
        figure: `${figure} ${q}`,
        setting,
        unit: 'ms',
        host,
        baselineLabel: `bare conditional write ${q}`,
        baseline: bare,
        ratio,
        target: targeted ? `p99 ≤ ${target.p99Ratio}× bare write p99` : undefined,
        verdict: targeted ? judge(ratio.median, (v) => v <= target.p99Ratio) : '—',
        digits: 1,
      });
    }
  };
  if (settle.length > 0) {
    const n = Math.round(spread(settle.map((x) => x.acknowledge.length)).median);
    const m = Math.round(spread(settle.map((x) => x.acknowledgeAll.length)).median);
    latencyRows(
      'acknowledge()',
      `in the worker, ${n} calls/run, batch 10, concurrency 1`,
      settle.map((x) => ({ host: x.acknowledge, bare: x.bareWrite })),
      { p99Ratio: 2 },
    );
    latencyRows(
      'acknowledgeAll()',
      `in the worker, ${m} calls/run, batch 1, concurrency 1`,
      settle.map((x) => ({ host: x.acknowledgeAll, bare: x.bareWriteAll })),
    );
  }
  for (const a of config.arrival) {
    const runs = s.arrival.filter((x) => x.ok && x.maxBatchTimeoutSeconds === a.maxBatchTimeoutSeconds);
    if (runs.length === 0) continue;
    const bound = (a.maxBatchTimeoutSeconds + 1) * 1000;
    for (const q of ['p50', 'p99'] as const) {
      const host = spread(runs.map((r) => percentiles(r.sendToHandler)[q]));
      rows.push({
        group: 'Latency',
        figure: `send → handler, idle consumer ${q}`,
        setting: `maxBatchTimeoutSeconds ${a.maxBatchTimeoutSeconds}, ${runs[0]!.sendToHandler.length} sends/run`,
        unit: 'ms',
        host,
        target: q === 'p99' ? `≤ ${bound} ms (timeout + 1 s)` : undefined,
        verdict: q === 'p99' ? judge(host.median, (v) => v <= bound) : '—',
        digits: 0,
      });
    }
    const idle = runs.flatMap((r) => (r.afterIdle ? [r.afterIdle] : []));
    if (idle.length > 0) {
      const host = spread(idle.map((x) => x.ms));
      rows.push({
        group: 'Latency',
        figure: 'send → handler after the consumer sat idle (no lane running, no supervisor round)',
        setting: `maxBatchTimeoutSeconds ${a.maxBatchTimeoutSeconds}, idle ${idle[0]!.idleMinutes} min`,
        unit: 'ms',
        host,
        target: `≤ ${bound} ms (timeout + 1 s)`,
        verdict: judge(host.max, (v) => v <= bound),
        digits: 0,
      });
    }
  }
  const cp = s.controlPlane.filter((x) => x.ok);
  if (cp.length > 0) {
    const n = cp[0]!.createToSucceeded.length;
    const g = cp[0]!.resourceGet.length;
    for (const [figure, setting, pick] of [
      [
        'Operation create → succeeded',
        `queue create, ${n}/run, GET /operations every 5 ms`,
        (x: (typeof cp)[number]) => x.createToSucceeded,
      ],
      ['Resource GET', `${g}/run`, (x: (typeof cp)[number]) => x.resourceGet],
    ] as const) {
      for (const q of ['p50', 'p99'] as const) {
        rows.push({
          group: 'Latency',
          figure: `${figure} ${q}`,
          setting,
          unit: 'ms',
          host: spread(cp.map((x) => percentiles(pick(x))[q])),
          baselineLabel: `bare conditional write ${q}`,
          baseline: spread(cp.map((x) => percentiles(x.bareWrite)[q])),
          ratio: spread(cp.map((x) => percentiles(pick(x))[q] / percentiles(x.bareWrite)[q])),
          verdict: '—',
          digits: 1,
        });
      }
    }
  }

  // --- cost --------------------------------------------------------------------------------
  let perBatchOps: Summary['perBatchOps'];
  for (const cell of config.cells) {
    const pairs = s.throughput.filter(
      (p) => p.host.ok && p.cell.batchSize === cell.batchSize && p.cell.concurrency === cell.concurrency,
    );
    if (pairs.length === 0) continue;
    const c = pairs.map(costOfPair);
    const perMillion = spread(c.map((x) => x.perMillion.total));
    const limit = cell.batchSize >= 100 ? 0.3 : cell.batchSize <= 10 ? 0.6 : undefined;
    rows.push({
      group: 'Cost',
      figure: 'USD per million messages',
      setting: cellKey(cell.batchSize, cell.concurrency),
      unit: 'USD',
      host: perMillion,
      baselineLabel: 'Cloudflare Queues',
      baseline: spread([PRICES.cloudflareQueuesPerMillionMessages]),
      ratio: spread(c.map((x) => x.perMillion.total / PRICES.cloudflareQueuesPerMillionMessages)),
      target: limit !== undefined ? `≤ $${limit.toFixed(2)}` : undefined,
      verdict: limit !== undefined ? judge(perMillion.median, (v) => v <= limit) : '—',
      digits: 3,
    });
    const tails = pairs.map((p) => {
      const lanes = Math.max(1, cell.concurrency);
      const sdk = sumSdk(p.host.tail, isDelivery);
      return {
        transitions: transitionsOf(p.host.tail) / lanes,
        lambda: Object.values(p.host.tail.lambda).reduce((a, l) => a + l.invocations, 0) / lanes,
        sqs: sdk.sqsRequests / lanes,
        dynamoCalls: sdk.dynamoCalls / lanes,
      };
    });
    costs.push({
      cell: cellKey(cell.batchSize, cell.concurrency),
      batchSize: cell.batchSize,
      concurrency: cell.concurrency,
      perMillion,
      breakdown: medianBreakdown(c.map((x) => x.perMillion)),
      transitionsPerBatch: spread(c.map((x) => x.transitionsPerBatch)),
      lambdaPerBatch: spread(c.map((x) => x.lambdaPerBatch)),
      dynamoCallsPerBatch: spread(c.map((x) => x.dynamoCallsPerBatch)),
      sqsPerMessage: spread(c.map((x) => x.sqsPerMessage)),
      rruPerMessage: spread(c.map((x) => x.rruPerMessage)),
      wruPerMessage: spread(c.map((x) => x.wruPerMessage)),
      tailPerLane: {
        transitions: spread(tails.map((t) => t.transitions)).median,
        lambda: spread(tails.map((t) => t.lambda)).median,
        sqs: spread(tails.map((t) => t.sqs)).median,
        dynamoCalls: spread(tails.map((t) => t.dynamoCalls)).median,
      },
      ops: addTallies(pairs.map((p) => p.host.drain)).sdk,
      batches: pairs.reduce((a, p) => a + p.host.batches, 0),
    });
    if (cell.batchSize === 100 && cell.concurrency === 10) {
      const drains = addTallies(pairs.map((p) => p.host.drain));
      perBatchOps = {
        cell: cellKey(cell.batchSize, cell.concurrency),
        batches: pairs.reduce((a, p) => a + p.host.batches, 0),
        ops: drains.sdk,
      };
    }
  }
  const producerPer100: Summary['producerPer100'] = {};
  {
    const ok = s.throughput.filter((p) => p.host.ok);
    const sent = ok.reduce((a, p) => a + p.host.messages, 0);
    const ops = addTallies(ok.map((p) => p.host.prefill)).sdk.producer ?? {};
    for (const [op, e] of Object.entries(ops))
      producerPer100[op] = {
        calls: (e.calls * 100) / Math.max(1, sent),
        wru: (e.wru * 100) / Math.max(1, sent),
      };
  }

  // --- idle --------------------------------------------------------------------------------
  const sup = s.supervisor;
  const monthlyParts = (t: Tally, rounds: number, metrics: number) =>
    scale(
      usd(t, () => true, metrics),
      MINUTES_PER_MONTH / Math.max(1, rounds),
    );
  const monthly = (t: Tally, rounds: number, metrics: number) => monthlyParts(t, rounds, metrics).total;
  const breakdownOne = medianBreakdown(sup.map((x) => monthlyParts(x.oneConsumer, x.rounds, 1)));
  const breakdownExtra = medianBreakdown(
    sup.map((x) => {
      const two = monthlyParts(x.twoConsumers, x.rounds, 2);
      const one = monthlyParts(x.oneConsumer, x.rounds, 1);
      return Object.fromEntries(
        Object.entries(two).map(([k, v]) => [k, v - one[k as keyof CostBreakdown]]),
      ) as unknown as CostBreakdown;
    }),
  );
  const one = spread(sup.map((x) => monthly(x.oneConsumer, x.rounds, 1)));
  const extra = spread(
    sup.map((x) => monthly(x.twoConsumers, x.rounds, 2) - monthly(x.oneConsumer, x.rounds, 1)),
  );
  const perRound: Record<string, number> = {};
  const marginalPerRound: Record<string, number> = {};
  if (sup.length > 0) {
    const rounds = sup.reduce((a, x) => a + x.rounds, 0);
    const oneOps = sumSdk(addTallies(sup.map((x) => x.oneConsumer)), () => true).byOp;
    const twoOps = sumSdk(addTallies(sup.map((x) => x.twoConsumers)), () => true).byOp;
    for (const [k, v] of Object.entries(oneOps)) perRound[k] = v.calls / rounds;
    for (const [k, v] of Object.entries(twoOps))
      marginalPerRound[k] = (v.calls - (oneOps[k]?.calls ?? 0)) / rounds;
  }
  let laneEnd: Summary['idle']['laneEnd'];
  const le = s.laneEnd.filter((x) => x.ok);
  if (le.length > 0) {
    const t = addTallies(le.map((x) => x.tally));
    const n = le.length;
    const sdk = sumSdk(t, isDelivery);
    const gbMs = Object.values(t.lambda).reduce((a, l) => a + l.billedMs, 0);
    laneEnd = {
      idleWaitSeconds: le[0]!.idleWaitSeconds,
      transitions: transitionsOf(t) / n,
      lambda: Object.values(t.lambda).reduce((a, l) => a + l.invocations, 0) / n,
      sqs: sdk.sqsRequests / n,
      usd: usd(t, isDelivery).total / n,
      gbSeconds: (gbMs / 1000 / n) * PRICES.lambdaMemoryGb,
    };
  }
  rows.push({
    group: 'Cost',
    figure: 'idle: a Host whose one consumer is idle',
    setting: 'supervisor round every minute, 30-day month',
    unit: 'USD/month',
    host: one,
    baselineLabel: 'Cloudflare (no invocation on an empty queue)',
    baseline: spread([0]),
    target: '≤ $1',
    verdict: judge(one.median, (v) => v <= 1),
    digits: 3,
  });
  rows.push({
    group: 'Cost',
    figure: 'idle: each further idle consumer',
    setting: 'marginal supervisor work per consumer',
    unit: 'USD/month',
    host: extra,
    target: '≤ $1',
    verdict: judge(extra.median, (v) => v <= 1),
    digits: 3,
  });

  return {
    rows,
    costs,
    perBatchOps,
    idle: {
      hostWithOneIdleConsumer: one,
      perExtraConsumer: extra,
      breakdownOne,
      breakdownExtra,
      perRound,
      marginalPerRound,
      roundMs: spread(sup.flatMap((x) => x.roundMs)),
      laneEnd,
    },
    throughputRatioAt,
    throughputRatiosAt,
    producerPer100,
    utilisationDetail:
      u.length > 0
        ? {
            meanHandlerMs: spread(u.map((x) => x.meanHandlerMs)),
            meanSlotMs: spread(u.map((x) => x.meanSlotMs)),
            peakHandlers: Math.max(...u.map((x) => x.peakHandlers)),
            maxConcurrency: u[0]!.maxConcurrency,
          }
        : undefined,
    callsPerSettle: meanRecord(settle.map((x) => x.callsPerSettle ?? {})),
  };
}

function meanRecord(list: Record<string, number>[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const r of list) for (const [k, v] of Object.entries(r)) out[k] = (out[k] ?? 0) + v / list.length;
  return out;
}

/** "1.00 DynamoDB:GetItem and 1.00 DynamoDB:UpdateItem" */
function describeCalls(calls: Record<string, number>): string {
  const parts = Object.entries(calls)
    .sort()
    .map(([op, n]) => `${fmt(n, 2)} ${op.replace('DynamoDB:', '')}`);
  return parts.length ? parts.join(' and ') : 'no counted calls';
}

// --- formatting --------------------------------------------------------------------------------

export function fmt(v: number, digits: number): string {
  if (!Number.isFinite(v)) return 'n/a';
  return v.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

export function fmtSpread(s: Spread | undefined, digits: number): string {
  if (!s || s.runs === 0) return 'n/a';
  if (s.runs === 1 || s.min === s.max) return fmt(s.median, digits);
  return `${fmt(s.median, digits)} [${fmt(s.min, digits)}–${fmt(s.max, digits)}]`;
}

const VERDICT_TEXT: Record<Verdict, string> = { met: '**met**', missed: '**missed**', '—': '—' };

export function resultsTable(summary: Summary, plain = false): string {
  const lines = [
    '| Group | Figure | Setting | Host | Baseline | Host ÷ baseline | Target | Met? |',
    '|---|---|---|---|---|---|---|---|',
  ];
  for (const r of summary.rows) {
    const unit = r.unit ? ` ${r.unit}` : '';
    const baseline = r.baseline ? `${fmtSpread(r.baseline, r.digits)}${unit} (${r.baselineLabel})` : '—';
    const verdict = plain ? r.verdict : VERDICT_TEXT[r.verdict];
    lines.push(
      `| ${r.group} | ${r.figure} | ${r.setting} | ${fmtSpread(r.host, r.digits)}${unit} | ${baseline} | ${fmtSpread(r.ratio, 2)} | ${r.target ?? '—'} | ${verdict} |`,
    );
  }
  return lines.join('\n');
}

function costTable(summary: Summary): string {
  const lines = [
    '| Cell | SQS | DynamoDB writes | DynamoDB reads | Step Functions | Lambda requests | Lambda duration | **Total** | Transitions / batch | Lambda invocations / batch | DynamoDB calls / batch | SQS requests / msg | RRU / msg | WRU / msg |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|',
  ];
  for (const c of summary.costs) {
    const b = c.breakdown;
    lines.push(
      `| ${c.cell} | ${fmt(b.sqs, 3)} | ${fmt(b.dynamoWrites, 3)} | ${fmt(b.dynamoReads, 3)} | ${fmt(b.stepFunctions, 3)} | ${fmt(b.lambdaRequests, 3)} | ${fmt(b.lambdaDuration, 3)} | **${fmt(b.total, 3)}** | ${fmtSpread(c.transitionsPerBatch, 2)} | ${fmtSpread(c.lambdaPerBatch, 2)} | ${fmtSpread(c.dynamoCallsPerBatch, 1)} | ${fmtSpread(c.sqsPerMessage, 3)} | ${fmtSpread(c.rruPerMessage, 3)} | ${fmtSpread(c.wruPerMessage, 3)} |`,
    );
  }
  return lines.join('\n');
}

function perBatchTable(summary: Summary): string {
  const p = summary.perBatchOps;
  if (!p) return '_not measured_';
  const roles = Object.keys(p.ops).filter(isDelivery).sort();
  const ops = [...new Set(roles.flatMap((r) => Object.keys(p.ops[r] ?? {})))].sort();
  const lines = [`| Call | ${roles.join(' | ')} |`, `|---|${roles.map(() => '---').join('|')}|`];
  for (const op of ops) {
    const cells = roles.map((r) => {
      const e = p.ops[r]?.[op];
      if (!e) return '';
      const per = e.calls / p.batches;
      const units =
        e.rru + e.wru > 0 ? ` (${fmt((e.rru + e.wru) / p.batches, 2)} ${e.wru > 0 ? 'WRU' : 'RRU'})` : '';
      return `${fmt(per, 2)}${units}`;
    });
    lines.push(`| ${op} | ${cells.join(' | ')} |`);
  }
  return lines.join('\n');
}

function opsPerRoundTable(perRound: Record<string, number>, marginal: Record<string, number>): string {
  const keys = [...new Set([...Object.keys(perRound), ...Object.keys(marginal)])].sort();
  const lines = ['| Call | per round, one consumer | added per further consumer |', '|---|---|---|'];
  for (const k of keys) lines.push(`| ${k} | ${fmt(perRound[k] ?? 0, 2)} | ${fmt(marginal[k] ?? 0, 2)} |`);
  return lines.join('\n');
}

const get = (rows: Row[], figure: string, setting?: string) =>
  rows.find((r) => r.figure === figure && (setting === undefined || r.setting.startsWith(setting)));

/** Why each missed target was missed and what would close it, from this run's figures. */
function explanations(summary: Summary): string[] {
  const out: string[] = [];
  const rows = summary.rows;
  const c100 = summary.costs.find((c) => c.batchSize === 100 && c.concurrency === 10);
  const tp = rows.find((r) => r.group === 'Throughput' && r.target);
  if (tp?.verdict === 'missed' && c100) {
    out.push(
      `**Throughput ratio (batch 100 / concurrency 10): ${fmtSpread(tp.ratio, 2)} against ≥ 0.7 — missed.** ` +
        `The raw loop does only the SQS work (${fmt(100 / 10, 0)} receives and ${fmt(100 / 10, 0)} DeleteMessageBatch per 100 messages). ` +
        `The Host adds, per batch, ${fmtSpread(c100.dynamoCallsPerBatch, 1)} DynamoDB calls made one after another (slot, registration, batch head and manifest, finalisation, slot release), ` +
        `${fmtSpread(c100.transitionsPerBatch, 1)} state transitions and ${fmtSpread(c100.lambdaPerBatch, 1)} Task/batch-host invocations, and a hop to a worker thread and back. ` +
        'Locally every DynamoDB call goes to one DynamoDB Local JVM on the same 2 cores, so the Host is bound by that round-trip chain, not by SQS. ' +
        `On this shared machine the raw loop itself ran at ${fmt(tp.baseline?.min ?? Number.NaN, 0)} to ${fmt(tp.baseline?.max ?? Number.NaN, 0)} msg/s across runs, so the ratio is noisy: it was below 0.7 in ${summary.throughputRatiosAt.filter((r) => r < 0.7).length} of ${summary.throughputRatiosAt.length} runs. ` +
        'What would close it: fewer sequential round trips per batch (read the attachment, queue and worker once per slot instead of again in register and finalize; drop the reads whose answer a conditional write already checks), and overlap — let a lane receive and register its next batch while the handler of the current one runs. On AWS each DynamoDB call is a few milliseconds over the network rather than a local JVM shared by every lane, so the absolute numbers differ, but the chain of sequential calls per batch stays.',
    );
  }
  const uh = get(rows, 'running handlers ÷ maxConcurrency');
  const us = get(rows, 'slots held ÷ maxConcurrency');
  if (uh?.verdict === 'missed') {
    out.push(
      `**Utilisation: ${fmtSpread(uh.host, 2)} of maxConcurrency running handlers — missed** (slots held: ${fmtSpread(us?.host, 2)}). ` +
        (summary.utilisationDetail
          ? `Never more than maxConcurrency handlers ran at once (peak ${summary.utilisationDetail.peakHandlers} of ${summary.utilisationDetail.maxConcurrency}, DL-02), and the slot map stays close to full; but a slot is held ${fmtSpread(summary.utilisationDetail.meanSlotMs, 0)} ms per batch of which the handler takes ${fmtSpread(summary.utilisationDetail.meanHandlerMs, 0)} ms. `
          : '') +
        "The rest is receiving, registering and finalising — sequential DynamoDB and SQS round trips — against a handler of only 50 ± 40 ms; the gap between slots held and 1.0 is the time from a release to the lane's next acquisition (AcquireSlot's reads and the state transitions in between). " +
        'What would close it: the same round-trip cuts as for throughput, and pipelining inside a lane (receive + register batch n+1 while batch n runs), so that a slot is in the handler most of the time. With handlers of seconds rather than milliseconds the same overhead would matter little.',
    );
  } else if (us?.verdict === 'missed') {
    out.push(
      `**Slot occupancy: ${fmtSpread(us.host, 2)} — missed.** Lanes wait between a released slot and the next acquisition (the WaitForSlot state and AcquireSlot's reads).`,
    );
  }
  const missedCosts = summary.costs.filter(
    (c) => rows.find((r) => r.group === 'Cost' && r.setting === c.cell)?.verdict === 'missed',
  );
  if (missedCosts.length > 0) {
    const steady = (b: number) =>
      summary.costs.find((c) => c.batchSize === b && c.concurrency === 1) ??
      summary.costs.find((c) => c.batchSize === b);
    const lines = [10, 100].flatMap((b) => {
      const c = steady(b);
      if (!c) return [];
      const limit = b >= 100 ? 0.3 : 0.6;
      const sfn = c.breakdown.stepFunctions;
      const rest = c.breakdown.total - sfn;
      const wruPerBatch = c.wruPerMessage.median * b;
      return [
        `at batch ${b} (${c.cell}): ${fmtSpread(c.transitionsPerBatch, 2)} transitions per batch make $${fmt(sfn, 2)} per million messages, ${fmt(sfn / limit, 1)}× the $${limit.toFixed(2)} target on their own; everything else together is $${fmt(rest, 3)} (${rest <= limit ? 'within' : 'also over'} the target), of which DynamoDB writes are $${fmt(c.breakdown.dynamoWrites, 3)} (${fmt(wruPerBatch, 1)} WRU per batch)`,
      ];
    });
    out.push(
      `**Cost: missed in ${missedCosts.length} of ${summary.costs.length} cells** (${missedCosts.map((c) => `$${fmt(c.perMillion.median, 2)}`).join(', ')} per million messages against ≤ $0.60 at batch 10 and ≤ $0.30 at batch 100; Cloudflare Queues: $1.20). ` +
        'A worker invocation runs batches back to back while the backlog lasts, so the four state transitions of a lane round (AcquireSlot, SlotTaken, InvokeWorker, Idle) are shared by its batches; with more lanes each lane gets fewer batches and pays more rounds, which is why cost grows with concurrency. ' +
        `In numbers, ${lines.join('; ')}. ` +
        'What would close it: cut the per-batch DynamoDB writes (head and manifest are two items, the slot map is written three times per batch: acquire, registration, release) and the repeated reads listed under "Performance problems"; start fewer lanes than maxConcurrency when the backlog is small; and where the worker timeout allows, run the lane loop as an Express workflow (billed per request and duration, not per transition).',
    );
  }
  const idleRow = get(rows, 'idle: a Host whose one consumer is idle');
  if (idleRow?.verdict === 'missed') {
    out.push(
      `**Idle cost: $${fmt(idleRow.host.median, 3)} per month — missed.** See the idle breakdown: the supervisor's round each minute is the whole cost.`,
    );
  }
  const ack = rows.find((r) => r.figure === 'acknowledge() p99');
  if (ack?.verdict === 'missed') {
    out.push(
      `**acknowledge() p99: ${fmtSpread(ack.host, 1)} ms, ${fmtSpread(ack.ratio, 2)}× the bare conditional write — missed.** ` +
        `Each call crosses from the worker thread to the Host thread and back, and the Host made ${describeCalls(summary.callsPerSettle)} per settlement: the batch head is read (a consistent GetItem) before the conditional UpdateItem, whose condition checks the same credential and open state again — two sequential DynamoDB round trips where one would do. ` +
        'What would close it: drop the head read (check the index bound on the worker side, which knows the batch size, or in the condition) so an acknowledgement is one conditional write.',
    );
  }
  for (const r of rows.filter((x) => x.figure.startsWith('send → handler') && x.verdict === 'missed')) {
    out.push(
      `**Send → handler (${r.setting}): p99 ${fmtSpread(r.host, 0)} ms — missed.** A lane that finds the queue empty long-polls for idleWaitSeconds and then ends; the local dispatcher restarts it at its next check, and a message sent in between waits for that restart, the slot acquisition and a receive.`,
    );
  }
  return out;
}

function problems(summary: Summary): string[] {
  const out: string[] = [];
  const p = summary.perBatchOps;
  if (p) {
    const reads = (role: string) => (p.ops[role]?.['DynamoDB:GetItem']?.calls ?? 0) / p.batches;
    out.push(
      `**Repeated reads per batch** (${p.cell}): GetItem per batch — AcquireSlot ${fmt(reads('step:AcquireSlot'), 2)}, register ${fmt(reads('batch-host:register'), 2)}, finalize ${fmt(reads('batch-host:finalize'), 2)}. ` +
        "The attachment, the queue Resource and the slot map are read again by each step (AcquireSlot reads the attachment, the slot map, the queue and the worker; register reads the slot map, the attachment, the queue, the head (to refuse a second registration) and the queue's attempts counter; finalize reads the head, the manifest, the attachment and the queue), all strongly consistent. " +
        'Not fixed here (the reads are part of the safety argument of DL-02/DL-09 and need a careful change); passing what AcquireSlot read along with the slot, and trusting only the ids, would remove most of them.',
    );
  }
  const c1 = summary.costs.find((c) => c.batchSize === 10 && c.concurrency === 1);
  const c50 = summary.costs.find((c) => c.batchSize === 10 && c.concurrency === 50);
  if (c1 && c50) {
    const perCall = (c: CellCost, role: string) => {
      const e = c.ops[role]?.['DynamoDB:UpdateItem'];
      return e ? (e.wru + e.refusedWrites) / Math.max(1, e.calls) : Number.NaN;
    };
    out.push(
      `**Slot-map writes grow with maxConcurrency**: at batch 10, WRU per message is ${fmtSpread(c1.wruPerMessage, 3)} at concurrency 1 and ${fmtSpread(c50.wruPerMessage, 3)} at concurrency 50; ` +
        `one slot acquisition (UpdateItem in AcquireSlot) costs ${fmt(perCall(c1, 'step:AcquireSlot'), 2)} WRU at concurrency 1 and ${fmt(perCall(c50, 'step:AcquireSlot'), 2)} at 50, the registration mark (UpdateItem in register) ${fmt(perCall(c1, 'batch-host:register'), 2)} and ${fmt(perCall(c50, 'batch-host:register'), 2)}. ` +
        'All slots of a consumer live in one item (`DISPATCH#<consumer>`, one map entry per running batch plus its registration mark), and a write is billed per KB of the whole item, so every acquire, registration and release costs more as more batches run. A counter item plus one item per slot would keep each of these writes at 1 WRU.',
    );
  }
  const tail = summary.costs.find((c) => c.batchSize === 100 && c.concurrency === 10)?.tailPerLane;
  if (tail && summary.idle.laneEnd) {
    out.push(
      `**Every burst ends with one idle cycle per lane**: after the queue empties each lane still takes a slot, long-polls once and registers an empty batch — per lane ${fmt(tail.transitions, 1)} transitions, ${fmt(tail.lambda, 1)} Lambda invocations, ${fmt(tail.sqs, 1)} SQS requests and ${fmt(tail.dynamoCalls, 1)} DynamoDB calls (measured after the drains). ` +
        `Measured on its own with idleWaitSeconds ${summary.idle.laneEnd.idleWaitSeconds}${summary.idle.laneEnd.idleWaitSeconds === 20 ? ' (the AWS default)' : ' (the AWS default is 20)'}, one lane end costs $${fmt(summary.idle.laneEnd.usd * 1e6, 0)} per million lane ends, mostly the ${fmt(summary.idle.laneEnd.gbSeconds, 1)} GB-s of the worker Lambda waiting on the long poll; the register call on an empty receive only releases the slot and could be skipped by releasing it in the runner's last step.`,
    );
  }
  out.push(
    '**Locally an idle consumer never rests**: the local dispatcher starts a new execution whenever one ends while the consumer is attached, so each lane of an idle consumer long-polls for idleWaitSeconds, then takes and releases a slot, for as long as `npm start` runs. On AWS the supervisor starts executions only for visible messages; the consequence there is the opposite: a message sent to an idle consumer waits for the next supervisor round (up to a minute) before a lane starts, far beyond `maxBatchTimeoutSeconds` + 1 s. The local send → handler figure does not show that.',
  );
  return out;
}

export function markdown(meta: BenchMeta, config: BenchConfig, summary: Summary, chartFile: string): string {
  const idle = summary.idle;
  const sections: string[] = [];
  sections.push(
    `# Benchmark results — ${meta.date}${config.mode === 'quick' ? ' (quick smoke run)' : ''}`,
    '',
    `Measured by \`npm run bench${config.mode === 'quick' ? ' -- --quick' : ''}\` on ${meta.cpus} × ${meta.cpuModel}, ${meta.platform}, Node ${meta.node}; ` +
      `wall time ${fmt(meta.wallSeconds, 0)} s; load average ${meta.loadAverageAtStart.map((v) => v.toFixed(2)).join(' ')} at start, ${meta.loadAverageAtEnd.map((v) => v.toFixed(2)).join(' ')} at the end ` +
      '(the machine is shared with other test runs, so every figure is set beside a baseline measured in the same run). ' +
      `Each figure is the median of ${config.runs} run${config.runs === 1 ? '' : 's'}, with [min–max] across runs. ` +
      'Everything comes from real runs against DynamoDB Local and the SQS stand-in in this process; only the USD conversion is estimated, with the prices listed at the end.',
    '',
    `![throughput, cost and latency](${chartFile})`,
    '',
    '## Results',
    '',
    resultsTable(summary),
    '',
    '## Targets missed: why, and what would close them',
    '',
  );
  const why = explanations(summary);
  sections.push(...(why.length ? why.flatMap((w) => [w, '']) : ['Every target was met.', '']));
  sections.push(
    '## Cost per million messages, by part (median run)',
    '',
    'Producer side included: messages are sent with `sendBatch` of 100 (10 SendMessageBatch requests and one commit write per 100). ',
    "Lambda duration uses the measured local durations of each Task and batch-host call, at 512 MB (the Host functions' default memory); the worker invocation includes the batch-host calls it waits for, which AWS bills twice (both functions run). Local durations include queueing on the one DynamoDB Local process and grow with concurrency; on AWS they would stay nearer the concurrency-1 figures. Writes refused by a condition are billed at 1 WRU each (DynamoDB Local does not report them). " +
      "Each drain is one burst. In a steady stream a batch is exactly four transitions (the concurrency-1 cells); with many lanes and few batches per lane the count per batch also holds each lane's next AcquireSlot/SlotTaken/InvokeWorker, already started when the last batch finished, so it reads higher at concurrency 10 and 50.",
    '',
    costTable(summary),
    '',
    `### Calls per batch at ${summary.perBatchOps?.cell ?? 'batch 100 / concurrency 10'} (all runs; by the part of the Host that made them)`,
    '',
    "Columns are Lambda functions on AWS: `step:AcquireSlot` (the dispatcher step), `worker:InvokeWorker` (the worker's runner: receives), `batch-host:*` (the runner's calls to the Host). Values are calls per batch, with request units per batch in brackets. " +
      `The producer, per 100 messages sent: ${Object.entries(summary.producerPer100)
        .sort()
        .map(([op, v]) => `${fmt(v.calls, 2)} ${op}${v.wru > 0 ? ` (${fmt(v.wru, 2)} WRU)` : ''}`)
        .join(', ')}.`,
    '',
    perBatchTable(summary),
    '',
    '## Idle consumer',
    '',
    "While a queue is empty nothing of its consumer runs on AWS except the supervisor's round every minute, which this bench runs for real (`superviseOnce` from lambdas/delivery/supervisor-handler.ts) against the stand-ins; CloudWatch (GetMetricData) is counted by a recording stub. " +
      'GetMetricData is billed per metric (one per queue here). ' +
      `A round took ${fmtSpread(idle.roundMs, 1)} ms locally, billed as one Lambda invocation at 512 MB.`,
    '',
    `- A Host whose only consumer is idle: **$${fmtSpread(idle.hostWithOneIdleConsumer, 3)} per month** (43,200 rounds).`,
    `- Each further idle consumer adds **$${fmtSpread(idle.perExtraConsumer, 3)} per month**.`,
    '',
    '| Per month | SQS | DynamoDB writes | DynamoDB reads | Step Functions | Lambda requests | Lambda duration | CloudWatch GetMetricData | **Total** |',
    '|---|---|---|---|---|---|---|---|---|',
    ...(
      [
        ['a Host with one idle consumer', idle.breakdownOne],
        ['each further idle consumer', idle.breakdownExtra],
      ] as const
    ).map(
      ([label, b]) =>
        `| ${label} | ${fmt(b.sqs, 3)} | ${fmt(b.dynamoWrites, 3)} | ${fmt(b.dynamoReads, 3)} | ${fmt(b.stepFunctions, 3)} | ${fmt(b.lambdaRequests, 3)} | ${fmt(b.lambdaDuration, 3)} | ${fmt(b.cloudwatch, 3)} | **${fmt(b.total, 3)}** |`,
    ),
    '',
    'GetMetricData is counted as one metric per queue the SEARCH expression matches (one queue per consumer here; dead-letter and unconsumed queues of the Host would add theirs).',
    '',
    opsPerRoundTable(idle.perRound, idle.marginalPerRound),
    '',
  );
  if (idle.laneEnd) {
    sections.push(
      `When a burst ends, each lane finishes with one idle cycle (measured alone, idleWaitSeconds ${idle.laneEnd.idleWaitSeconds}): ${fmt(idle.laneEnd.transitions, 1)} transitions, ${fmt(idle.laneEnd.lambda, 1)} Lambda invocations (${fmt(idle.laneEnd.gbSeconds, 2)} GB-s, mostly the long poll), ${fmt(idle.laneEnd.sqs, 1)} SQS requests: $${fmt(idle.laneEnd.usd, 6)} per lane end. That is per burst, not per minute.`,
      '',
    );
  }
  sections.push('## Performance problems found', '', ...problems(summary).flatMap((p) => [p, '']));
  sections.push(
    '## How each figure is measured',
    '',
    "- **Throughput**: one Host per run (its own table, queue, worker and consumer, composed by `composeHost` as `npm start` does), the queue pre-filled through the producer (`sendBatch` of 100), then the production dispatcher definition started under aws-local-stepfunctions with a no-op worker in the worker-thread pool (threads started before the runs, as in a long-running Host). Timed from the dispatcher's start until the last message's batch is finalised (deleted from SQS). Baseline in the same run, right after: a fresh queue on the same SQS server filled with bodies of the same size, drained by `concurrency` loops that receive ≤10 per call (WaitTimeSeconds 0) until they hold `batchSize` messages and delete them with DeleteMessageBatch. Ratio per run pair, then the median.",
    '- **Utilisation**: a worker that sleeps 50 ± 40 ms (uniform) and records its start and end; integrated from the first handler start to the last (after that the backlog is gone). The slot map is read every 25 ms over the same window.',
    '- **acknowledge() / acknowledgeAll()**: timed inside the worker around each call (`performance.now()`): worker thread → Host thread → DeliveryService.settle → DynamoDB Local → back; each on a consumer with maxConcurrency 1 on a Host of its own. Bare write: conditional UpdateItems on one item of the same table from the Host thread, one at a time 5 ms apart, during the same phase; only those that started while a handler was running are kept, so both meet the same load (the lane is inside the handler, nothing else of the Host runs). The control-plane rows use bare writes measured right after their phase.',
    '- **Send → handler**: `producer.send()` to a consumer with nothing to do, one message at a time after a random pause of 0.2–4 s, until the handler records its start. The lane long-polls for idleWaitSeconds 3 (the local default is 10) and then ends; the dispatcher starts a new execution at its next check (every 500 ms, as `npm start`), so sends meet both a waiting long poll and a restarting lane. The runs of this scenario run side by side, one Host each.',
    "- **Operation create → succeeded**: POST /resources (an AtLeastOnceQueue, which creates an SQS queue) through the Host's HTTP core in process, then GET /operations/{id} every 5 ms while the executor loop runs as in `npm start`. **Resource GET**: GET /resources/{uid} in sequence.",
    "- **Cost**: SDK middleware on the Host's DynamoDB and SQS clients counts every call by service, operation and calling part of the Host (AsyncLocalStorage), and adds `ReturnConsumedCapacity: TOTAL` to every DynamoDB command that supports it; request units are the ones DynamoDB Local reports. State transitions are the `StateEntered` (and `StateRetried`) events of each root execution; Lambda invocations are the Task handlers (AcquireSlot, InvokeWorker, RecoverBatch) plus each batch-host call (register, settle, finalize, deadLetter), each of which is one Lambda invoke on AWS. Durations are measured locally. The local dispatcher's own consumer check (a stand-in for the supervisor) is not counted as per-message cost.",
    '',
    '## Prices used',
    '',
    `Checked ${PRICES.checked}; ${PRICES.region}.`,
    '',
    '| Item | Price | Source |',
    '|---|---|---|',
    ...PRICE_SOURCES.map((p) => `| ${p.item} | ${p.price} | ${p.source} |`),
    '',
  );
  return sections.join('\n');
}
