/** Steady-stream rows: achieved rate and send → handler latency beside the raw loop under the same producer. */
import type { BenchSamples, SteadyPair } from '../results-model.ts';
import type { SteadySetting } from '../scenarios/steady.ts';
import type { Row } from '../summary-model.ts';
import { spread } from '../support/stats.ts';
import { sameSetting, steadyId, steadyLabel } from './cells.ts';

/** Runs whose Host and baseline both finished (results before steady streams have none). */
export const okSteadyPairs = (s: BenchSamples): SteadyPair[] =>
  (s.steady ?? []).filter((p) => p.host.ok && p.baseline.ok);

export const pairsOfSetting = (pairs: SteadyPair[], setting: SteadySetting) =>
  pairs.filter((p) => sameSetting(p.host.setting, setting));

export function steadyRows(settings: SteadySetting[], okPairs: SteadyPair[]): Row[] {
  const rows: Row[] = [];
  for (const setting of settings) {
    const pairs = pairsOfSetting(okPairs, setting);
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
  return rows;
}
