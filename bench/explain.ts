/**
 * The words the explanations of a run are written in, shared by the report and the cost page's
 * region: which cells they quote, DynamoDB requests by part with the items they named, and where
 * a drain's CPU went. Only this run's numbers are quoted, so that no sentence can describe code
 * the run did not measure; where a cause is not measured, only the number is stated.
 */
import { fmt, fmtSpread } from './format.ts';
import { kindsOf } from './part-items.ts';
import { dynamoParts, type PartBreakdown } from './per-batch.ts';
import type { CellCounts, CpuPerBatch, Row, Summary } from './summary-model.ts';

export const byKey = (s: Summary, key: string): Row | undefined => s.rows.find((r) => r.key === key);
export const missed = (r: Row | undefined): r is Row => r?.verdict === 'missed';

/** "ATTACH 1.00, RES 2.00": item counts per batch, by kind in alphabetical order. */
const kindList = (kinds: Record<string, number>, batches: number) =>
  Object.entries(kinds)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([k, n]) => `${k} ${fmt(n / Math.max(1, batches), 2)}`)
    .join(', ');

/** "batch-host:register 7.00 (reads 6.00: ATTACH 1.00, …; writes 1.00: …); …" */
export function dynamoByPart(b: PartBreakdown, withKinds = true): string {
  return dynamoParts(b)
    .map((p) => {
      const r = withKinds ? kindList(kindsOf(b, p.part, true), b.batches) : '';
      const w = withKinds ? kindList(kindsOf(b, p.part, false), b.batches) : '';
      const reads = `reads ${fmt(p.reads, 2)}${r ? `: ${r}` : ''}`;
      const writes = `writes ${fmt(p.writes, 2)}${w ? `: ${w}` : ''}`;
      return `${p.part} ${fmt(p.reads + p.writes, 2)} (${reads}; ${writes})`;
    })
    .join('; ');
}

/** The cells whose breakdown the explanations quote: a drain, and a steady stream if measured. */
export function referenceCells(s: Summary): CellCounts[] {
  const steady = s.cells.find((c) => c.kind === 'steady' && c.batchSize === 10);
  const drain =
    s.cells.find((c) => c.kind === 'drain' && c.batchSize === 100 && c.concurrency === 10) ??
    s.cells.find((c) => c.kind === 'drain');
  return [drain, steady].filter((c): c is CellCounts => c !== undefined);
}

/**
 * Where a drain's time went in CPU: when the cores are busy, time per batch is CPU per batch,
 * and only less CPU per batch (fewer or cheaper requests) closes the gap, not more overlap.
 */
export function cpuSentence(cpu: CpuPerBatch, target?: number): string {
  const base = Number.isFinite(cpu.baseline.median)
    ? `; the raw loop ${fmtSpread(cpu.baseline, 1)} ms per batch with ${fmtSpread(cpu.baselineCores, 2)} cores busy` +
      ' (one Node thread and the SQS stand-in)'
    : '';
  // Throughput is cores busy ÷ CPU per batch on each side, so the ratio is reached at this
  // Host's cores busy with CPU per batch ≤ raw loop's × (Host cores ÷ raw cores) ÷ target.
  const limit = (cpu.baseline.median * cpu.cores.median) / (cpu.baselineCores.median * (target ?? 1));
  const need =
    target && Number.isFinite(limit)
      ? ` With the cores busy now, the ratio reaches ${target} at ≤ ${fmt(limit, 1)} ms of CPU per batch in all processes,` +
        ` ${fmt(Math.max(0, cpu.all.median - limit), 1)} ms less than now.`
      : '';
  const processes = [
    `the Host process ${fmtSpread(cpu.host, 1)}`,
    `DynamoDB Local ${fmtSpread(cpu.dynamodb, 1)}`,
    `the SQS stand-in ${fmtSpread(cpu.sqs, 1)}`,
  ].join(', ');
  return (
    `CPU per batch: ${fmtSpread(cpu.all, 1)} ms in all (${processes}) with ${fmtSpread(cpu.cores, 2)} cores busy${base}.` +
    need
  );
}
