/**
 * Turns raw samples into the summary (medians with min and max over runs), the met/missed
 * verdicts against issue 13's targets, the Markdown report and the console table. Every number
 * here is computed from the samples of this run; the only outside inputs are the prices.
 */
import { explanations, findings, partTable, referenceCells } from './explain.ts';
import { fmt, fmtSpread } from './format.ts';
import {
  isDelivery,
  type PartBreakdown,
  PER_BATCH_FIGURES,
  PER_BATCH_LABELS,
  type PerBatch,
  type PerBatchFigure,
  partBreakdown,
  perBatchOf,
  spreadPerBatch,
} from './per-batch.ts';
import { type CostBreakdown, PRICE_SOURCES, PRICES, scale, transitionsOf, usd } from './pricing.ts';
import type { BenchConfig, BenchMeta, BenchSamples, SteadyPair, ThroughputPair } from './results-model.ts';
import { percentiles } from './scenarios/latency.ts';
import type { SteadySetting } from './scenarios/steady.ts';
import { type CpuSpent, totalCpu } from './support/cpu.ts';
import { addTallies, sumSdk, type Tally } from './support/meter.ts';
import { type Spread, spread } from './support/stats.ts';

export { fmt, fmtSpread } from './format.ts';
export { isDelivery } from './per-batch.ts';

export const MINUTES_PER_MONTH = 30 * 24 * 60;

/** Issue 13's targets ("Targets" table): reported with met/missed, never asserted in tests. */
export const TARGETS = {
  throughputRatio: [
    { batchSize: 100, concurrency: 10, atLeast: 0.7 },
    { batchSize: 10, concurrency: 10, atLeast: 0.3 },
  ],
  handlerUtilisation: 0.9,
  dynamoRequestsPerBatch: 6,
  /** USD per million messages, by batch size (every concurrency). */
  usdPerMillion: { 10: 0.6, 100: 0.3 } as Record<number, number>,
  idleMonthlyUsd: 1,
  /** Send → handler on an idle consumer: at most maxBatchTimeoutSeconds plus this. */
  arrivalSlackMs: 1000,
} as const;

export type Verdict = 'met' | 'missed' | '—';

export interface Row {
  /** A stable name for the explanations: `throughput:100x10`, `dynamo:drain:10x1`, `cost:10x1`, … */
  key?: string;
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
  sqsPerMessage: Spread;
  rruPerMessage: Spread;
  wruPerMessage: Spread;
  /** After the last message, per lane: `rounds` are worker invocations started then (a lane going round again). */
  tailPerLane: { transitions: number; lambda: number; sqs: number; dynamoCalls: number; rounds: number };
}

/** Per-batch counts of one cell, drain or steady stream, beside its same-run baseline. */
export interface CellCounts {
  kind: 'drain' | 'steady';
  /** `drain, batch 10 / concurrency 1` or `steady 200 msg/s, batch 10 / concurrency 10`. */
  label: string;
  /** `10x1`, the key part of the rows about this cell. */
  id: string;
  batchSize: number;
  concurrency: number;
  rate?: number;
  messagesPerBatch: Spread;
  perBatch: Record<PerBatchFigure, Spread>;
  /** The raw loop's SQS requests per batch (it makes no DynamoDB, Step Functions or Lambda calls). */
  baselineSqsPerBatch: Spread;
  perMillion: Spread;
  breakdown: PartBreakdown;
  /** Drains measured with CPU times: CPU per batch of each process, beside the raw loop's. */
  cpu?: CpuPerBatch;
}

/** CPU milliseconds per batch over a drain, and the cores that kept busy on average. */
export interface CpuPerBatch {
  /** The bench process: the Host's Node main thread (SDK calls, Host logic) and its worker threads. */
  host: Spread;
  dynamodb: Spread;
  sqs: Spread;
  all: Spread;
  cores: Spread;
  /** The raw loop, every process (it runs in the bench process and uses the SQS stand-in only). */
  baseline: Spread;
  baselineCores: Spread;
}

/** CPU per batch from samples that carry CPU times (results written before them have none). */
export function cpuPerBatch(
  runs: { host: { cpu?: CpuSpent; batches: number }; baseline?: { cpu?: CpuSpent; batches?: number } }[],
): CpuPerBatch | undefined {
  const measured = runs.filter((r) => r.host.cpu && r.host.batches > 0);
  if (measured.length === 0) return undefined;
  const per = (f: (c: CpuSpent) => number) =>
    spread(measured.map((r) => (f(r.host.cpu as CpuSpent) * 1000) / r.host.batches));
  const base = measured.flatMap((r) =>
    r.baseline?.cpu && (r.baseline.batches ?? 0) > 0
      ? [{ cpu: r.baseline.cpu, batches: r.baseline.batches ?? 0 }]
      : [],
  );
  return {
    host: per((c) => c.host),
    dynamodb: per((c) => c.dynamodb ?? Number.NaN),
    sqs: per((c) => c.sqs ?? Number.NaN),
    all: per(totalCpu),
    cores: spread(
      measured.map((r) => totalCpu(r.host.cpu as CpuSpent) / (r.host.cpu as CpuSpent).wallSeconds),
    ),
    baseline: spread(base.map((b) => (totalCpu(b.cpu) * 1000) / b.batches)),
    baselineCores: spread(base.map((b) => totalCpu(b.cpu) / b.cpu.wallSeconds)),
  };
}

export interface Summary {
  rows: Row[];
  costs: CellCost[];
  cells: CellCounts[];
  /** The producer's calls per 100 messages sent (sendBatch of 100), from the pre-fills. */
  producerPer100: Record<string, { calls: number; wru: number }>;
  utilisationDetail:
    | {
        meanHandlerMs: Spread;
        meanSlotMs: Spread;
        peakHandlers: number;
        maxConcurrency: number;
        cpu?: CpuPerBatch;
      }
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
      dynamoCalls: number;
      usd: number;
      gbSeconds: number;
    };
  };
  /** Per-run Host ÷ baseline throughput ratios of each drain cell (`100x10` → ratios). */
  throughputRatios: Record<string, number[]>;
  /** SDK calls the Host made per settlement call (mean over the settle-latency runs). */
  callsPerSettle: Record<string, number>;
}

export const cellKey = (b: number, c: number) => `batch ${b} / concurrency ${c}`;
export const cellId = (b: number, c: number) => `${b}x${c}`;
export const steadyLabel = (s: SteadySetting) =>
  `steady ${fmt(s.rate, 0)} msg/s, ${cellKey(s.batchSize, s.concurrency)}`;

export const steadyId = (s: SteadySetting) => `${s.rate}/s:${cellId(s.batchSize, s.concurrency)}`;

function judge(value: number, ok: (v: number) => boolean): Verdict {
  return Number.isFinite(value) ? (ok(value) ? 'met' : 'missed') : '—';
}

function okPairs(pairs: ThroughputPair[]) {
  return pairs.filter((p) => p.host.ok && p.baseline.ok);
}

/** A burst's cost: the producer's sends, the drain, and the lanes' ends after it (`tail`). */
function costOfPair(p: ThroughputPair) {
  const all = addTallies([p.host.prefill, p.host.drain, p.host.tail]);
  const total = usd(all, isDelivery);
  const perMillion = scale(total, 1e6 / Math.max(1, p.host.delivered));
  const sdk = sumSdk(all, isDelivery);
  return {
    perMillion,
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

/** Drain cells: per-batch counts from each run's drain, beside the raw loop of the same run. */
function drainCounts(cell: { batchSize: number; concurrency: number }, pairs: ThroughputPair[]): CellCounts {
  const runs: PerBatch[] = pairs.map((p) => perBatchOf(p.host.drain, p.host.batches));
  return {
    kind: 'drain',
    label: `drain, ${cellKey(cell.batchSize, cell.concurrency)}`,
    id: cellId(cell.batchSize, cell.concurrency),
    batchSize: cell.batchSize,
    concurrency: cell.concurrency,
    messagesPerBatch: spread(pairs.map((p) => p.host.delivered / Math.max(1, p.host.batches))),
    perBatch: spreadPerBatch(runs),
    baselineSqsPerBatch: spread(
      pairs.map((p) =>
        p.baseline.batches ? (p.baseline.receives + p.baseline.deletes) / p.baseline.batches : Number.NaN,
      ),
    ),
    perMillion: spread(pairs.map((p) => costOfPair(p).perMillion.total)),
    breakdown: partBreakdown(
      pairs.map((p) => p.host.drain),
      pairs.reduce((a, p) => a + p.host.batches, 0),
    ),
    ...withCpu(cpuPerBatch(pairs)),
  };
}

const withCpu = (cpu: CpuPerBatch | undefined) => (cpu ? { cpu } : {});

/** Steady cells: counts inside each run's window, per batch finalised in it. */
function steadyCounts(setting: SteadySetting, pairs: SteadyPair[]): CellCounts {
  return {
    kind: 'steady',
    label: steadyLabel(setting),
    id: steadyId(setting),
    batchSize: setting.batchSize,
    concurrency: setting.concurrency,
    rate: setting.rate,
    messagesPerBatch: spread(pairs.map((p) => p.host.batchMessages / Math.max(1, p.host.batches))),
    perBatch: spreadPerBatch(pairs.map((p) => perBatchOf(p.host.tally, p.host.batches))),
    baselineSqsPerBatch: spread(
      pairs.map((p) => (p.baseline.receives + p.baseline.deletes) / Math.max(1, p.baseline.batches)),
    ),
    perMillion: spread(
      pairs.map((p) => (usd(p.host.tally, isDelivery).total * 1e6) / Math.max(1, p.host.batchMessages)),
    ),
    breakdown: partBreakdown(
      pairs.map((p) => p.host.tally),
      pairs.reduce((a, p) => a + p.host.batches, 0),
    ),
  };
}

const sameSetting = (a: SteadySetting, b: SteadySetting) =>
  a.rate === b.rate &&
  a.batchSize === b.batchSize &&
  a.concurrency === b.concurrency &&
  a.maxBatchTimeoutSeconds === b.maxBatchTimeoutSeconds;

export function summarise(config: BenchConfig, s: BenchSamples): Summary {
  const rows: Row[] = [];
  const costs: CellCost[] = [];
  const cells: CellCounts[] = [];
  const throughputRatios: Record<string, number[]> = {};

  // --- throughput (drain) ------------------------------------------------------------------
  for (const cell of config.cells) {
    const pairs = okPairs(
      s.throughput.filter(
        (p) => p.cell.batchSize === cell.batchSize && p.cell.concurrency === cell.concurrency,
      ),
    );
    const ratios = pairs.map((p) => p.host.perSecond / p.baseline.perSecond);
    throughputRatios[cellId(cell.batchSize, cell.concurrency)] = ratios;
    const ratio = spread(ratios);
    const target = TARGETS.throughputRatio.find(
      (t) => t.batchSize === cell.batchSize && t.concurrency === cell.concurrency,
    );
    rows.push({
      key: `throughput:${cellId(cell.batchSize, cell.concurrency)}`,
      group: 'Throughput',
      figure: 'messages/s, no-op worker',
      setting: `${cellKey(cell.batchSize, cell.concurrency)}, ${cell.messages} msgs`,
      unit: 'msg/s',
      host: spread(pairs.map((p) => p.host.perSecond)),
      baselineLabel: 'raw receive+delete loop',
      baseline: spread(pairs.map((p) => p.baseline.perSecond)),
      ratio,
      target: target ? `Host ÷ baseline ≥ ${target.atLeast}` : undefined,
      verdict: target ? judge(ratio.median, (v) => v >= target.atLeast) : '—',
      digits: 0,
    });
  }

  // --- steady stream -----------------------------------------------------------------------
  const steadyPairs = (s.steady ?? []).filter((p) => p.host.ok && p.baseline.ok);
  for (const setting of config.steady?.settings ?? []) {
    const pairs = steadyPairs.filter((p) => sameSetting(p.host.setting, setting));
    if (pairs.length === 0) continue;
    const label = `${steadyLabel(setting)}, maxBatchTimeoutSeconds ${setting.maxBatchTimeoutSeconds}`;
    const id = steadyId(setting);
    rows.push({
      key: `steady:${id}:throughput`,
      group: 'Steady stream',
      figure: 'achieved messages/s, no-op worker',
      setting: label,
      unit: 'msg/s',
      host: spread(pairs.map((p) => p.host.perSecond)),
      baselineLabel: 'raw receive+delete loop, same producer',
      baseline: spread(pairs.map((p) => p.baseline.perSecond)),
      ratio: spread(pairs.map((p) => p.host.perSecond / p.baseline.perSecond)),
      verdict: '—',
      digits: 0,
    });
    for (const q of ['p50', 'p99'] as const) {
      rows.push({
        key: `steady:${id}:${q}`,
        group: 'Steady stream',
        figure: `send → handler ${q}`,
        setting: label,
        unit: 'ms',
        host: spread(pairs.map((p) => p.host.latency[q])),
        baselineLabel: `raw loop, send → batch formed ${q}`,
        baseline: spread(pairs.map((p) => p.baseline.latency[q])),
        ratio: spread(pairs.map((p) => p.host.latency[q] / p.baseline.latency[q])),
        verdict: '—',
        digits: 0,
      });
    }
  }

  // --- utilisation -------------------------------------------------------------------------
  const u = s.utilisation.filter((x) => x.ok);
  if (u.length > 0) {
    const first = u[0]!;
    const setting = `concurrency ${first.maxConcurrency}, batch ${first.batchSize}, handler 50 ± 40 ms`;
    const handlers = spread(u.map((x) => x.handlerUtilisation));
    rows.push({
      key: 'utilisation:handlers',
      group: 'Utilisation',
      figure: 'running handlers ÷ maxConcurrency',
      setting,
      unit: '',
      host: handlers,
      target: `≥ ${TARGETS.handlerUtilisation}`,
      verdict: judge(handlers.median, (v) => v >= TARGETS.handlerUtilisation),
      digits: 2,
    });
    rows.push({
      key: 'utilisation:slots',
      group: 'Utilisation',
      figure: 'slots held ÷ maxConcurrency',
      setting,
      unit: '',
      host: spread(u.map((x) => x.slotUtilisation)),
      verdict: '—',
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
        key: `settle:${figure}:${q}`,
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
    const bound = a.maxBatchTimeoutSeconds * 1000 + TARGETS.arrivalSlackMs;
    for (const q of ['p50', 'p99'] as const) {
      const host = spread(runs.map((r) => percentiles(r.sendToHandler)[q]));
      rows.push({
        key: `arrival:${a.maxBatchTimeoutSeconds}:${q}`,
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
        key: `arrival:${a.maxBatchTimeoutSeconds}:after-idle`,
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

  // --- per batch: every drain and steady cell ------------------------------------------------
  for (const cell of config.cells) {
    const pairs = s.throughput.filter(
      (p) => p.host.ok && p.cell.batchSize === cell.batchSize && p.cell.concurrency === cell.concurrency,
    );
    if (pairs.length > 0) cells.push(drainCounts(cell, pairs));
  }
  for (const setting of config.steady?.settings ?? []) {
    const pairs = steadyPairs.filter((p) => sameSetting(p.host.setting, setting));
    if (pairs.length > 0) cells.push(steadyCounts(setting, pairs));
  }
  for (const c of cells) {
    const v = c.perBatch.dynamoRequests;
    rows.push({
      key: `dynamo:${c.kind}:${c.id}`,
      group: 'Per batch',
      figure: 'DynamoDB requests per batch, happy path (return = acknowledge)',
      setting: `${c.label}, ${fmtSpread(c.messagesPerBatch, 1)} msgs/batch`,
      unit: '',
      host: v,
      baselineLabel: 'raw receive+delete loop',
      baseline: spread([0]),
      target: `≤ ${TARGETS.dynamoRequestsPerBatch}`,
      verdict: judge(v.median, (x) => x <= TARGETS.dynamoRequestsPerBatch),
      digits: 1,
    });
  }

  // --- cost --------------------------------------------------------------------------------
  for (const cell of config.cells) {
    const pairs = s.throughput.filter(
      (p) => p.host.ok && p.cell.batchSize === cell.batchSize && p.cell.concurrency === cell.concurrency,
    );
    if (pairs.length === 0) continue;
    const c = pairs.map(costOfPair);
    const perMillion = spread(c.map((x) => x.perMillion.total));
    const limit = TARGETS.usdPerMillion[cell.batchSize];
    rows.push({
      key: `cost:${cellId(cell.batchSize, cell.concurrency)}`,
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
        rounds: (p.host.tail.lambda['worker:InvokeWorker']?.invocations ?? 0) / lanes,
      };
    });
    costs.push({
      cell: cellKey(cell.batchSize, cell.concurrency),
      batchSize: cell.batchSize,
      concurrency: cell.concurrency,
      perMillion,
      breakdown: medianBreakdown(c.map((x) => x.perMillion)),
      sqsPerMessage: spread(c.map((x) => x.sqsPerMessage)),
      rruPerMessage: spread(c.map((x) => x.rruPerMessage)),
      wruPerMessage: spread(c.map((x) => x.wruPerMessage)),
      tailPerLane: {
        transitions: spread(tails.map((t) => t.transitions)).median,
        lambda: spread(tails.map((t) => t.lambda)).median,
        sqs: spread(tails.map((t) => t.sqs)).median,
        dynamoCalls: spread(tails.map((t) => t.dynamoCalls)).median,
        rounds: spread(tails.map((t) => t.rounds)).median,
      },
    });
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
      dynamoCalls: sdk.dynamoCalls / n,
      usd: usd(t, isDelivery).total / n,
      gbSeconds: (gbMs / 1000 / n) * PRICES.lambdaMemoryGb,
    };
  }
  rows.push({
    key: 'idle:one',
    group: 'Cost',
    figure: 'idle: a Host whose one consumer is idle',
    setting: 'supervisor round every minute, 30-day month',
    unit: 'USD/month',
    host: one,
    baselineLabel: 'Cloudflare (no invocation on an empty queue)',
    baseline: spread([0]),
    target: `≤ $${TARGETS.idleMonthlyUsd}`,
    verdict: judge(one.median, (v) => v <= TARGETS.idleMonthlyUsd),
    digits: 3,
  });
  rows.push({
    group: 'Cost',
    figure: 'idle: each further idle consumer',
    setting: 'marginal supervisor work per consumer',
    unit: 'USD/month',
    host: extra,
    verdict: '—',
    digits: 3,
  });

  return {
    rows,
    costs,
    cells,
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
    throughputRatios,
    producerPer100,
    utilisationDetail:
      u.length > 0
        ? {
            meanHandlerMs: spread(u.map((x) => x.meanHandlerMs)),
            meanSlotMs: spread(u.map((x) => x.meanSlotMs)),
            peakHandlers: Math.max(...u.map((x) => x.peakHandlers)),
            maxConcurrency: u[0]!.maxConcurrency,
            ...withCpu(cpuPerBatch(u.map((x) => ({ host: { cpu: x.cpu, batches: x.batches } })))),
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

// --- tables ----------------------------------------------------------------------------------

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

/** Targets met out of targets judged, for the summary line. */
export function targetCount(summary: Summary): { met: number; judged: number } {
  const judged = summary.rows.filter((r) => r.target && r.verdict !== '—');
  return { met: judged.filter((r) => r.verdict === 'met').length, judged: judged.length };
}

const FIGURE_DIGITS: Record<PerBatchFigure, number> = {
  dynamoRequests: 1,
  wru: 1,
  rru: 1,
  transitions: 2,
  lambda: 2,
  sqsRequests: 1,
};

/** Every cell's per-batch counts, beside the raw loop's SQS requests of the same run. */
export function perBatchTable(summary: Summary): string {
  const lines = [
    `| Cell | Messages / batch | ${PER_BATCH_FIGURES.map((f) => `${PER_BATCH_LABELS[f]} / batch`).join(' | ')} | Raw loop: SQS requests / batch | USD per million messages |`,
    `|---|---|${PER_BATCH_FIGURES.map(() => '---').join('|')}|---|---|`,
  ];
  for (const c of summary.cells) {
    lines.push(
      `| ${c.label} | ${fmtSpread(c.messagesPerBatch, 1)} | ${PER_BATCH_FIGURES.map((f) => fmtSpread(c.perBatch[f], FIGURE_DIGITS[f])).join(' | ')} | ${fmtSpread(c.baselineSqsPerBatch, 1)} | ${fmtSpread(c.perMillion, 3)} |`,
    );
  }
  return lines.join('\n');
}

/** CPU per batch of the drains that measured it, beside the raw loop's; empty when none did. */
export function cpuTable(summary: Summary, cores: number): string {
  const rows = summary.cells.flatMap((c) => (c.cpu ? [{ label: c.label, cpu: c.cpu }] : []));
  const u = summary.utilisationDetail?.cpu;
  if (u) rows.push({ label: 'utilisation, batch 10 / concurrency 10, handler 50 ± 40 ms', cpu: u });
  if (rows.length === 0) return '';
  const lines = [
    `CPU milliseconds per batch over each drain, by process, and the cores kept busy on average (the machine has ${cores}). The bench process runs the Host's Node main thread — every SDK call, the Host's logic — and its worker threads; the raw loop runs in the same process and uses the SQS stand-in only. One Node main thread can keep at most one core busy.`,
    '',
    '| Cell | Host process ms / batch | DynamoDB Local ms / batch | SQS stand-in ms / batch | All ms / batch | Cores busy | Raw loop ms / batch | Raw loop cores busy | Host ÷ raw loop, CPU per batch |',
    '|---|---|---|---|---|---|---|---|---|',
  ];
  for (const { label, cpu } of rows) {
    const ratio = cpu.all.median / cpu.baseline.median;
    lines.push(
      `| ${label} | ${fmtSpread(cpu.host, 1)} | ${fmtSpread(cpu.dynamodb, 1)} | ${fmtSpread(cpu.sqs, 1)} | ${fmtSpread(cpu.all, 1)} | ${fmtSpread(cpu.cores, 2)} | ${Number.isFinite(cpu.baseline.median) ? fmtSpread(cpu.baseline, 1) : '—'} | ${Number.isFinite(cpu.baselineCores.median) ? fmtSpread(cpu.baselineCores, 2) : '—'} | ${Number.isFinite(ratio) ? fmt(ratio, 1) : '—'} |`,
    );
  }
  return lines.join('\n');
}

function costTable(summary: Summary): string {
  const lines = [
    '| Cell | SQS | DynamoDB writes | DynamoDB reads | Step Functions | Lambda requests | Lambda duration | **Total** | SQS requests / msg | RRU / msg | WRU / msg |',
    '|---|---|---|---|---|---|---|---|---|---|---|',
  ];
  for (const c of summary.costs) {
    const b = c.breakdown;
    lines.push(
      `| ${c.cell} | ${fmt(b.sqs, 3)} | ${fmt(b.dynamoWrites, 3)} | ${fmt(b.dynamoReads, 3)} | ${fmt(b.stepFunctions, 3)} | ${fmt(b.lambdaRequests, 3)} | ${fmt(b.lambdaDuration, 3)} | **${fmt(b.total, 3)}** | ${fmtSpread(c.sqsPerMessage, 3)} | ${fmtSpread(c.rruPerMessage, 3)} | ${fmtSpread(c.wruPerMessage, 3)} |`,
    );
  }
  return lines.join('\n');
}

function opsPerRoundTable(perRound: Record<string, number>, marginal: Record<string, number>): string {
  const keys = [...new Set([...Object.keys(perRound), ...Object.keys(marginal)])].sort();
  const lines = ['| Call | per round, one consumer | added per further consumer |', '|---|---|---|'];
  for (const k of keys) lines.push(`| ${k} | ${fmt(perRound[k] ?? 0, 2)} | ${fmt(marginal[k] ?? 0, 2)} |`);
  return lines.join('\n');
}

export function markdown(meta: BenchMeta, config: BenchConfig, summary: Summary, chartFile: string): string {
  const idle = summary.idle;
  const targets = targetCount(summary);
  const steady = config.steady;
  const sections: string[] = [];
  sections.push(
    `# Benchmark results — ${meta.date}${config.mode === 'quick' ? ' (quick smoke run)' : ''}`,
    '',
    `Measured by \`npm run bench${config.mode === 'quick' ? ' -- --quick' : ''}\`${meta.commit ? ` at \`${meta.commit}\`` : ''} on ${meta.cpus} × ${meta.cpuModel}, ${meta.platform}, Node ${meta.node}; ` +
      `wall time ${fmt(meta.wallSeconds, 0)} s; load average ${meta.loadAverageAtStart.map((v) => v.toFixed(2)).join(' ')} at start, ${meta.loadAverageAtEnd.map((v) => v.toFixed(2)).join(' ')} at the end ` +
      '(the machine is shared with other test runs, so every figure is set beside a baseline measured in the same run). ' +
      (meta.probeMs
        ? `Machine speed: a fixed single-thread workload (\`machineProbeMs\`) took ${fmt(meta.probeMs.atStart, 0)} ms at start and ${fmt(meta.probeMs.atEnd, 0)} ms at the end; compare absolute figures across runs only at similar probe times. `
        : '') +
      `Each figure is the median of ${config.runs} run${config.runs === 1 ? '' : 's'}${steady ? ` (steady stream: ${steady.runs})` : ''}, with [min–max] across runs. ` +
      'Everything comes from real runs against DynamoDB Local and the SQS stand-in in this process; only the USD conversion is estimated, with the prices listed at the end.',
    '',
    `**Targets met: ${targets.met} of ${targets.judged}** (issue 13's, and the acknowledge() bound).`,
    '',
    `![throughput, cost and latency](${chartFile})`,
    '',
    '## Results',
    '',
    resultsTable(summary),
    '',
    '## Targets missed: why, and what would close them',
    '',
    "Written from this run's counts; item kinds are the first part of each key the Host named (`ATTACH`: attachment, `RES`: Resource, `DISPATCH`: slot map, `BATCH/head` and `BATCH/manifest`: the batch records, `QSTATE`: queue state, `COMMIT`: send commits, `query:` a Query of that partition).",
    '',
  );
  const why = explanations(summary);
  sections.push(...(why.length ? why.flatMap((w) => [w, '']) : ['Every target was met.', '']));
  sections.push(
    '## Per batch, every cell',
    '',
    "Per finalised batch, from the meter: drains from the dispatcher's start to the last message finalised; steady streams inside the measurement window. The producer's own calls are counted per message (in the cost), not here. WRU include writes refused by a condition (1 WRU each, as AWS bills them). The raw loop makes no DynamoDB, Step Functions or Lambda calls, so its SQS requests are its only baseline.",
    '',
    perBatchTable(summary),
    '',
  );
  const cpu = cpuTable(summary, meta.cpus);
  if (cpu) sections.push('### CPU per batch', '', cpu, '');
  for (const c of referenceCells(summary)) {
    sections.push(
      `### Calls per batch by part: ${c.label} (all runs, ${fmt(c.breakdown.batches, 0)} batches)`,
      '',
      "Columns are Lambda functions on AWS: `step:AcquireSlot` (the dispatcher step), `worker:InvokeWorker` (the worker's runner: receives), `batch-host:*` (the runner's calls to the Host). Values are calls per batch, request units per batch in brackets, then the items named per batch by kind.",
      '',
      partTable(c.breakdown),
      '',
    );
  }
  sections.push(
    '## Cost per million messages, by part (drains, median run)',
    '',
    'Producer side included: messages are sent with `sendBatch` of 100. ' +
      `The producer, per 100 messages sent: ${Object.entries(summary.producerPer100)
        .sort()
        .map(([op, v]) => `${fmt(v.calls, 2)} ${op}${v.wru > 0 ? ` (${fmt(v.wru, 2)} WRU)` : ''}`)
        .join(', ')}. ` +
      "Lambda duration uses the measured local durations of each Task and batch-host call, at 512 MB (the Host functions' default memory); the worker invocation includes the batch-host calls it waits for, which AWS bills twice (both functions run). Local durations include queueing on the one DynamoDB Local process and grow with concurrency. Each drain is one burst, priced until its lanes have ended by themselves after the last message (each lane's last idle wait, at the bench's idleWaitSeconds 1, and the end of each execution: the worker invocation's whole duration is billed then); the per-batch counts above are the drain's window only. With the default idle wait (10 s locally, 20 s on AWS) a lane that waits for the next message runs that much longer; How lanes end (below) prices one.",
    '',
    costTable(summary),
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
    opsPerRoundTable(idle.perRound, idle.marginalPerRound),
    '',
  );
  const found = findings(summary);
  if (found.length > 0) sections.push('## Other measured findings', '', ...found.flatMap((p) => [p, '']));
  sections.push(
    '## How each figure is measured',
    '',
    "- **Throughput (drain)**: one Host per run (its own table, queue, worker and consumer, composed by `composeHost` as `npm start` does), the queue pre-filled through the producer (`sendBatch` of 100), then the delivery side started as the local Host runs it (the control loop's lanes: the production dispatcher definition under the local Step Functions stand-in, and its supervisor) with a no-op worker in the worker-thread pool (threads started before the runs). Timed from the start until the last message's batch is finalised. Baseline in the same run, right after: a fresh queue on the same SQS server filled with bodies of the same size, drained by `concurrency` loops that receive ≤10 per call (WaitTimeSeconds 0) until they hold `batchSize` messages and delete them with DeleteMessageBatch. Ratio per run pair, then the median.",
    steady
      ? `- **Steady stream**: a producer sends \`sendBatch\` through the Host every 50 ms at the stated rate (so sends wake the consumer, as on AWS) for ${steady.timing.warmupSeconds} s of warm-up and a ${steady.timing.seconds} s window; achieved throughput counts messages whose handler started in the window, send → handler is each message's send time (its envelope) to its handler's start, for messages sent in the window; per-batch counts are the window's calls per batch finalised in it. Baseline right after on the same SQS server: the same producer straight to SQS (\`SendMessageBatch\` of 10) and \`concurrency\` raw loops that form batches as the runner does (a 1 s long poll for the first message, then up to maxBatchTimeoutSeconds for the rest), then delete them; its latency ends when the batch is formed.`
      : '- **Steady stream**: not measured in this run.',
    '- **Utilisation**: a worker that sleeps 50 ± 40 ms (uniform) and records its start and end; integrated from the first handler start to the last (after that the backlog is gone). Held slots are read through the delivery service every 25 ms over the same window.',
    '- **acknowledge() / acknowledgeAll()**: timed inside the worker around each call (`performance.now()`): worker thread → Host thread → DeliveryService.settle → DynamoDB Local → back; each on a consumer with maxConcurrency 1 on a Host of its own. Bare write: conditional UpdateItems on one item of the same table from the Host thread, one at a time 5 ms apart, during the same phase; only those that started while a handler was running are kept. The control-plane rows use bare writes measured right after their phase.',
    '- **Send → handler, idle consumer**: `producer.send()` through the Host to a consumer with nothing to do, one message at a time after a random pause of 0.2–4 s, until the handler records its start. The lane long-polls for idleWaitSeconds 3 and ends when nothing arrives; a send wakes the consumer (a new lane) when no lane is receiving; no supervisor round runs during these runs. The after-idle row sends once more after every lane ended and the consumer sat idle for the stated time. These runs run side by side, one Host each.',
    "- **Operation create → succeeded**: POST /resources (an AtLeastOnceQueue, which creates an SQS queue) through the Host's HTTP core in process, then GET /operations/{id} every 5 ms while the executor loop runs as in `npm start`. **Resource GET**: GET /resources/{uid} in sequence.",
    "- **Cost and counts**: SDK middleware on the Host's DynamoDB and SQS clients counts every call by service, operation, the calling part of the Host (AsyncLocalStorage) and the kinds of item it names, and adds `ReturnConsumedCapacity: TOTAL` to every DynamoDB command that supports it; request units are the ones DynamoDB Local reports, plus 2 WRU for each `ConditionCheck` of a transaction, which AWS bills as a transactional write and DynamoDB Local reports as none. State transitions are the `StateEntered` (and `StateRetried`) events of each lane execution, billed for lanes on the Standard dispatcher; a lane on the Express dispatcher (every cell here: the bench's worker bound of 30 s fits its window) is billed as one request and its duration from start to its last event, rounded up to 100 ms, at 64 MB; Lambda invocations are the Task handlers (AcquireSlot, InvokeWorker, RecoverBatch, HandOver) plus each batch-host call of the runner (acquire, register, settle, finalize, deadLetter), each one Lambda invoke on AWS. Durations are measured locally. The supervisor's rounds are not counted as per-message cost. Receipt handles are as long as SQS's (392 characters; the SQS stand-in lengthens fauxqs's 36-character ones, `sqs-receipt-handles.ts`), so the Host's records of them are AWS's size.",
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
