/** Drain throughput rows: the Host beside the raw receive+delete loop of the same run. */
import type { ThroughputPair } from '../results-model.ts';
import type { Cell } from '../scenarios/throughput.ts';
import type { Row } from '../summary-model.ts';
import { spread } from '../support/stats.ts';
import { cellId, cellKey } from './cells.ts';
import { judge, TARGETS } from './targets.ts';

/** A ratio needs both sides: a run whose Host or baseline failed says nothing about either. */
const okPairs = (pairs: ThroughputPair[]) => pairs.filter((p) => p.host.ok && p.baseline.ok);

export function throughputRows(
  cells: Cell[],
  samples: ThroughputPair[],
): { rows: Row[]; ratios: Record<string, number[]> } {
  const rows: Row[] = [];
  const ratiosByCell: Record<string, number[]> = {};
  for (const cell of cells) {
    const pairs = okPairs(
      samples.filter((p) => p.cell.batchSize === cell.batchSize && p.cell.concurrency === cell.concurrency),
    );
    const ratios = pairs.map((p) => p.host.perSecond / p.baseline.perSecond);
    ratiosByCell[cellId(cell.batchSize, cell.concurrency)] = ratios;
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
  return { rows, ratios: ratiosByCell };
}

/** The drains of one cell whose Host side finished (the baseline may have failed). */
export const hostDrains = (samples: ThroughputPair[], cell: Cell) =>
  samples.filter(
    (p) => p.host.ok && p.cell.batchSize === cell.batchSize && p.cell.concurrency === cell.concurrency,
  );
