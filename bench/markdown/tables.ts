/** The report's tables of counts and prices, one function per table, each a Markdown string. */
import { fmt, fmtSpread } from '../format.ts';
import {
  itemsPerBatch,
  type PartBreakdown,
  PER_BATCH_FIGURES,
  PER_BATCH_LABELS,
  type PerBatchFigure,
} from '../per-batch.ts';
import type { CostBreakdown } from '../pricing.ts';
import type { IdleSummary, Summary } from '../summary-model.ts';
import type { SdkTally } from '../support/meter.ts';

const row = (cells: string[]) => `| ${cells.join(' | ')} |`;
const separator = (columns: number) => `|${Array.from({ length: columns }, () => '---').join('|')}|`;

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
    row([
      'Cell',
      'Messages / batch',
      ...PER_BATCH_FIGURES.map((f) => `${PER_BATCH_LABELS[f]} / batch`),
      'Raw loop: SQS requests / batch',
      'USD per million messages',
    ]),
    separator(PER_BATCH_FIGURES.length + 4),
  ];
  for (const c of summary.cells) {
    lines.push(
      row([
        c.label,
        fmtSpread(c.messagesPerBatch, 1),
        ...PER_BATCH_FIGURES.map((f) => fmtSpread(c.perBatch[f], FIGURE_DIGITS[f])),
        fmtSpread(c.baselineSqsPerBatch, 1),
        fmtSpread(c.perMillion, 3),
      ]),
    );
  }
  return lines.join('\n');
}

const CPU_COLUMNS = [
  'Cell',
  'Host process ms / batch',
  'DynamoDB Local ms / batch',
  'SQS stand-in ms / batch',
  'All ms / batch',
  'Cores busy',
  'Raw loop ms / batch',
  'Raw loop cores busy',
  'Host ÷ raw loop, CPU per batch',
];

/** CPU per batch of the drains that measured it, beside the raw loop's; empty when none did. */
export function cpuTable(summary: Summary, cores: number): string {
  const rows = summary.cells.flatMap((c) => (c.cpu ? [{ label: c.label, cpu: c.cpu }] : []));
  const u = summary.utilisationDetail?.cpu;
  if (u) rows.push({ label: 'utilisation, batch 10 / concurrency 10, handler 50 ± 40 ms', cpu: u });
  if (rows.length === 0) return '';
  const lines = [
    `CPU milliseconds per batch over each drain, by process, and the cores kept busy on average (the machine has ${cores}).` +
      " The bench process runs the Host's Node main thread — every SDK call, the Host's logic — and its worker threads;" +
      ' the raw loop runs in the same process and uses the SQS stand-in only. One Node main thread can keep at most one core busy.',
    '',
    row(CPU_COLUMNS),
    separator(CPU_COLUMNS.length),
  ];
  const orDash = (ok: boolean, text: () => string) => (ok ? text() : '—');
  for (const { label, cpu } of rows) {
    const ratio = cpu.all.median / cpu.baseline.median;
    lines.push(
      row([
        label,
        fmtSpread(cpu.host, 1),
        fmtSpread(cpu.dynamodb, 1),
        fmtSpread(cpu.sqs, 1),
        fmtSpread(cpu.all, 1),
        fmtSpread(cpu.cores, 2),
        orDash(Number.isFinite(cpu.baseline.median), () => fmtSpread(cpu.baseline, 1)),
        orDash(Number.isFinite(cpu.baselineCores.median), () => fmtSpread(cpu.baselineCores, 2)),
        orDash(Number.isFinite(ratio), () => fmt(ratio, 1)),
      ]),
    );
  }
  return lines.join('\n');
}

/** A cost breakdown's parts in the tables' column order, three decimals each. */
export const usdParts = (b: CostBreakdown) =>
  [b.sqs, b.dynamoWrites, b.dynamoReads, b.stepFunctions, b.lambdaRequests, b.lambdaDuration, b.logs].map(
    (v) => fmt(v, 3),
  );

export const PART_COLUMNS = [
  'SQS',
  'DynamoDB writes',
  'DynamoDB reads',
  'Step Functions',
  'Lambda requests',
  'Lambda duration',
  'CloudWatch Logs',
];

/** USD per million messages of each drain, by part, with the requests and units per message. */
export function costTable(summary: Summary): string {
  const lines = [
    row(['Cell', ...PART_COLUMNS, '**Total**', 'SQS requests / msg', 'RRU / msg', 'WRU / msg']),
    separator(PART_COLUMNS.length + 5),
  ];
  for (const c of summary.costs) {
    const b = c.breakdown;
    lines.push(
      row([
        c.cell,
        ...usdParts(b),
        `**${fmt(b.total, 3)}**`,
        fmtSpread(c.sqsPerMessage, 3),
        fmtSpread(c.rruPerMessage, 3),
        fmtSpread(c.wruPerMessage, 3),
      ]),
    );
  }
  return lines.join('\n');
}

/** Monthly USD by part of a Host with one idle consumer, and of each further one. */
export function idleCostTable(idle: IdleSummary): string[] {
  const breakdowns = [
    ['a Host with one idle consumer', idle.breakdownOne],
    ['each further idle consumer', idle.breakdownExtra],
  ] as const;
  return [
    row(['Per month', ...PART_COLUMNS, 'CloudWatch GetMetricData', '**Total**']),
    separator(PART_COLUMNS.length + 3),
    ...breakdowns.map(([label, b]) =>
      row([label, ...usdParts(b), fmt(b.cloudwatch, 3), `**${fmt(b.total, 3)}**`]),
    ),
  ];
}

/** The supervisor's SDK calls per round, and what each further consumer adds to a round. */
export function opsPerRoundTable(perRound: Record<string, number>, marginal: Record<string, number>): string {
  const keys = [...new Set([...Object.keys(perRound), ...Object.keys(marginal)])].sort();
  const lines = ['| Call | per round, one consumer | added per further consumer |', '|---|---|---|'];
  for (const k of keys) lines.push(`| ${k} | ${fmt(perRound[k] ?? 0, 2)} | ${fmt(marginal[k] ?? 0, 2)} |`);
  return lines.join('\n');
}

/** "1.00 (2.00 WRU) — ATTACH 1.00": calls per batch, their request units, and the items they named. */
function callsCell(e: SdkTally | undefined, n: number): string {
  if (!e) return '';
  const units = e.rru + e.wru + e.refusedWrites;
  const unitText = units > 0 ? ` (${fmt(units / n, 2)} ${e.wru + e.refusedWrites > 0 ? 'WRU' : 'RRU'})` : '';
  const items = itemsPerBatch(e, n);
  return `${fmt(e.calls / n, 2)}${unitText}${items ? ` — ${items}` : ''}`;
}

/** "AcquireSlot 1.00, InvokeWorker 1.00": counts per batch by name, in alphabetical order. */
const perBatchList = (counts: Record<string, number>, n: number) =>
  Object.entries(counts)
    .sort(([x], [y]) => x.localeCompare(y))
    .map(([name, k]) => `${name} ${fmt(k / n, 2)}`)
    .join(', ');

/** Calls per batch by the part of the Host that made them, with request units and item kinds. */
export function partTable(b: PartBreakdown): string {
  const parts = Object.keys(b.ops).sort();
  if (parts.length === 0) return '_not measured_';
  const ops = [...new Set(parts.flatMap((r) => Object.keys(b.ops[r] ?? {})))].sort();
  const n = Math.max(1, b.batches);
  const lines = [`| Call | ${parts.join(' | ')} |`, `|---|${parts.map(() => '---').join('|')}|`];
  for (const op of ops)
    lines.push(`| ${op} | ${parts.map((p) => callsCell(b.ops[p]?.[op], n)).join(' | ')} |`);
  const states = perBatchList(b.transitions, n);
  const lambda = perBatchList(b.lambda, n);
  lines.push(
    '',
    `Per batch — state transitions: ${states || 'none'}; Lambda invocations: ${lambda || 'none'}.`,
  );
  return lines.join('\n');
}
