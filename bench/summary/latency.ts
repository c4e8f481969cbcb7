/**
 * Latency rows: settlement calls and control-plane requests beside a bare conditional write of
 * the same phase, and send → handler on an idle consumer against its bound.
 */
import type { BenchConfig } from '../results-model.ts';
import {
  type ArrivalSample,
  type ControlPlaneSample,
  percentiles,
  type SettleLatencySample,
} from '../scenarios/latency.ts';
import type { Row } from '../summary-model.ts';
import { spread } from '../support/stats.ts';
import { judge, TARGETS } from './targets.ts';

const QUANTILES = ['p50', 'p99'] as const;

/** p50 and p99 of a figure timed in each run, beside the bare writes timed in the same run. */
function beside(
  figure: string,
  setting: string,
  runs: { host: number[]; bare: number[] }[],
  target?: { p99Ratio: number },
): Row[] {
  return QUANTILES.map((q) => {
    const ratio = spread(runs.map((r) => percentiles(r.host)[q] / percentiles(r.bare)[q]));
    const targeted = target && q === 'p99';
    return {
      key: `settle:${figure}:${q}`,
      group: 'Latency',
      figure: `${figure} ${q}`,
      setting,
      unit: 'ms',
      host: spread(runs.map((r) => percentiles(r.host)[q])),
      baselineLabel: `bare conditional write ${q}`,
      baseline: spread(runs.map((r) => percentiles(r.bare)[q])),
      ratio,
      target: targeted ? `p99 ≤ ${target.p99Ratio}× bare write p99` : undefined,
      verdict: targeted ? judge(ratio.median, (v) => v <= target.p99Ratio) : '—',
      digits: 1,
    };
  });
}

/** `ok` is the settle-latency runs that finished. */
export function settleRows(ok: SettleLatencySample[]): Row[] {
  if (ok.length === 0) return [];
  const n = Math.round(spread(ok.map((x) => x.acknowledge.length)).median);
  const m = Math.round(spread(ok.map((x) => x.acknowledgeAll.length)).median);
  return [
    ...beside(
      'acknowledge()',
      `in the worker, ${n} calls/run, batch 10, concurrency 1`,
      ok.map((x) => ({ host: x.acknowledge, bare: x.bareWrite })),
      { p99Ratio: TARGETS.acknowledgeP99Ratio },
    ),
    ...beside(
      'acknowledgeAll()',
      `in the worker, ${m} calls/run, batch 1, concurrency 1`,
      ok.map((x) => ({ host: x.acknowledgeAll, bare: x.bareWriteAll })),
    ),
  ];
}

/** Send → handler by maxBatchTimeoutSeconds: p50, p99 and the send after the consumer sat idle. */
export function arrivalRows(settings: BenchConfig['arrival'], samples: ArrivalSample[]): Row[] {
  const rows: Row[] = [];
  for (const a of settings) {
    const runs = samples.filter((x) => x.ok && x.maxBatchTimeoutSeconds === a.maxBatchTimeoutSeconds);
    if (runs.length === 0) continue;
    const bound = a.maxBatchTimeoutSeconds * 1000 + TARGETS.arrivalSlackMs;
    for (const q of QUANTILES) {
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
        // Every send after idling must meet the bound, not only the median one.
        verdict: judge(host.max, (v) => v <= bound),
        digits: 0,
      });
    }
  }
  return rows;
}

/** `ok` is the control-plane runs that finished. */
export function controlPlaneRows(ok: ControlPlaneSample[]): Row[] {
  const first = ok[0];
  if (!first) return [];
  const figures = [
    [
      'Operation create → succeeded',
      `queue create, ${first.createToSucceeded.length}/run, GET /operations every 5 ms`,
      (x: ControlPlaneSample) => x.createToSucceeded,
    ],
    ['Resource GET', `${first.resourceGet.length}/run`, (x: ControlPlaneSample) => x.resourceGet],
  ] as const;
  return figures.flatMap(([figure, setting, pick]) =>
    QUANTILES.map((q) => ({
      group: 'Latency',
      figure: `${figure} ${q}`,
      setting,
      unit: 'ms',
      host: spread(ok.map((x) => percentiles(pick(x))[q])),
      baselineLabel: `bare conditional write ${q}`,
      baseline: spread(ok.map((x) => percentiles(x.bareWrite)[q])),
      ratio: spread(ok.map((x) => percentiles(pick(x))[q] / percentiles(x.bareWrite)[q])),
      verdict: '—' as const,
      digits: 1,
    })),
  );
}

/** The mean of each key over the runs; a run without the key counts 0 for it. */
export function meanRecord(list: Record<string, number>[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const r of list) for (const [k, v] of Object.entries(r)) out[k] = (out[k] ?? 0) + v / list.length;
  return out;
}
