/**
 * The Markdown report of one run (`bench/results/<date>.md` and latest.md): how it was measured,
 * the results table, why each missed target was missed, counts and cost by part, the idle
 * consumer, other findings, the method and the prices. Each section is a list of lines.
 */
import { referenceCells } from '../explain.ts';
import { findings } from '../findings.ts';
import { fmt, fmtSpread } from '../format.ts';
import { explanations } from '../misses/explanations.ts';
import { PRICE_SOURCES, PRICES } from '../pricing.ts';
import type { BenchConfig, BenchMeta } from '../results-model.ts';
import { shapesSection } from '../shapes/render.ts';
import { targetCount } from '../summary/targets.ts';
import type { IdleSummary, Summary } from '../summary-model.ts';
import { methodSection } from './method.ts';
import { resultsTable } from './results-table.ts';
import { costTable, cpuTable, idleCostTable, opsPerRoundTable, partTable, perBatchTable } from './tables.ts';

/** Where and how the run was measured, in one paragraph. */
function measuredOn(meta: BenchMeta, config: BenchConfig): string {
  const command = `npm run bench${config.mode === 'quick' ? ' -- --quick' : ''}`;
  const load = (averages: number[]) => averages.map((v) => v.toFixed(2)).join(' ');
  const steady = config.steady;
  return (
    `Measured by \`${command}\`${meta.commit ? ` at \`${meta.commit}\`` : ''}` +
    ` on ${meta.cpus} × ${meta.cpuModel}, ${meta.platform}, Node ${meta.node}; ` +
    `wall time ${fmt(meta.wallSeconds, 0)} s;` +
    ` load average ${load(meta.loadAverageAtStart)} at start, ${load(meta.loadAverageAtEnd)} at the end ` +
    '(the machine is shared with other test runs, so every figure is set beside a baseline measured in the same run). ' +
    (meta.probeMs
      ? 'Machine speed: a fixed single-thread workload (`machineProbeMs`)' +
        ` took ${fmt(meta.probeMs.atStart, 0)} ms at start and ${fmt(meta.probeMs.atEnd, 0)} ms at the end;` +
        ' compare absolute figures across runs only at similar probe times. '
      : '') +
    `Each figure is the median of ${config.runs} run${config.runs === 1 ? '' : 's'}` +
    `${steady ? ` (steady stream: ${steady.runs})` : ''}, with [min–max] across runs. ` +
    'Everything comes from real runs against DynamoDB Local and the SQS stand-in in this process;' +
    ' only the USD conversion is estimated, with the prices listed at the end.'
  );
}

function headerSection(meta: BenchMeta, config: BenchConfig, summary: Summary, chartFile: string): string[] {
  const targets = targetCount(summary);
  return [
    `# Benchmark results — ${meta.date}${config.mode === 'quick' ? ' (quick smoke run)' : ''}`,
    '',
    measuredOn(meta, config),
    '',
    `**Targets met: ${targets.met} of ${targets.judged}** (the bench's targets and the acknowledge() bound).`,
    '',
    `![throughput, cost and latency](${chartFile})`,
    '',
    '## Results',
    '',
    resultsTable(summary),
    '',
  ];
}

const ITEM_KINDS =
  "Written from this run's counts; item kinds are the first part of each key the Host named" +
  ' (`ATTACH`: attachment, `RES`: Resource, `DISPATCH`: slot map, `BATCH/head` and `BATCH/manifest`: the batch records,' +
  ' `QSTATE`: queue state, `COMMIT`: send commits, `query:` a Query of that partition).';

function missesSection(summary: Summary): string[] {
  const why = explanations(summary);
  return [
    '## Targets missed: why, and what would close them',
    '',
    ITEM_KINDS,
    '',
    ...(why.length ? why.flatMap((w) => [w, '']) : ['Every target was met.', '']),
  ];
}

const PER_BATCH_INTRO = [
  "Per finalised batch, from the meter: drains from the dispatcher's start to the last message finalised;" +
    ' steady streams inside the measurement window.',
  "The producer's own calls are counted per message (in the cost), not here.",
  'WRU include writes refused by a condition (1 WRU each, as AWS bills them).',
  'The raw loop makes no DynamoDB, Step Functions or Lambda calls, so its SQS requests are its only baseline.',
].join(' ');

const PART_COLUMNS_NOTE =
  'Columns are Lambda functions on AWS: `step:AcquireSlot` (the dispatcher step),' +
  " `worker:InvokeWorker` (the worker's runner: receives), `batch-host:*` (the runner's calls to the Host)." +
  ' Values are calls per batch, request units per batch in brackets, then the items named per batch by kind.';

function perBatchSection(meta: BenchMeta, summary: Summary): string[] {
  const lines = ['## Per batch, every cell', '', PER_BATCH_INTRO, '', perBatchTable(summary), ''];
  const cpu = cpuTable(summary, meta.cpus);
  if (cpu) lines.push('### CPU per batch', '', cpu, '');
  for (const c of referenceCells(summary)) {
    lines.push(
      `### Calls per batch by part: ${c.label} (all runs, ${fmt(c.breakdown.batches, 0)} batches)`,
      '',
      PART_COLUMNS_NOTE,
      '',
      partTable(c.breakdown),
      '',
    );
  }
  return lines;
}

const MEMORY = PRICES.lambdaMemoryMb;

const HOW_COST_IS_PRICED = [
  'Lambda duration uses the measured local durations of each Task and batch-host call,' +
    ` at the memory each function is deployed with (the step function ${MEMORY.step} MB, the batch host ${fmt(MEMORY.batchHost, 0)} MB, a worker ${MEMORY.worker} MB);` +
    ' the worker invocation includes the batch-host calls it waits for, which AWS bills twice (both functions run).',
  "CloudWatch Logs prices what the functions would write: Lambda's START, END and REPORT lines per invocation," +
    ' the line each function writes per call (and its EMF metrics), and every Host line at the deployed level (INFO), as Powertools Logger formats them.',
  'Local durations include queueing on the one DynamoDB Local process and grow with concurrency.',
  'Each drain is one burst, priced until its lanes have ended by themselves after the last message' +
    " (each lane's last idle wait, at the bench's idleWaitSeconds 1, and the end of each execution:" +
    " the worker invocation's whole duration is billed then); the per-batch counts above are the drain's window only.",
  'With the default idle wait (10 s locally, 20 s on AWS) a lane that waits for the next message runs that much longer;' +
    ' How lanes end (below) prices one.',
].join(' ');

function costSection(summary: Summary): string[] {
  const producer = Object.entries(summary.producerPer100)
    .sort()
    .map(([op, v]) => `${fmt(v.calls, 2)} ${op}${v.wru > 0 ? ` (${fmt(v.wru, 2)} WRU)` : ''}`)
    .join(', ');
  return [
    '## Cost per million messages, by part (drains, median run)',
    '',
    'Producer side included: messages are sent with `sendBatch` of 100. ' +
      `The producer, per 100 messages sent: ${producer}. ` +
      HOW_COST_IS_PRICED,
    '',
    costTable(summary),
    '',
  ];
}

const IDLE_INTRO =
  "While a queue is empty nothing of its consumer runs on AWS except the supervisor's round every minute," +
  ' which this bench runs for real (`superviseOnce` from lambdas/composition/aws-supervisor.ts) against the stand-ins;' +
  ' CloudWatch (GetMetricData) is counted by a recording stub. ' +
  'GetMetricData is billed per metric (one per queue here). ';

function idleSection(idle: IdleSummary): string[] {
  return [
    '## Idle consumer',
    '',
    `${IDLE_INTRO}A round took ${fmtSpread(idle.roundMs, 1)} ms locally, billed as one Lambda invocation at ${MEMORY.supervisor} MB.`,
    '',
    `- A Host whose only consumer is idle: **$${fmtSpread(idle.hostWithOneIdleConsumer, 3)} per month** (43,200 rounds).`,
    `- Each further idle consumer adds **$${fmtSpread(idle.perExtraConsumer, 3)} per month**.`,
    '',
    ...idleCostTable(idle),
    '',
    opsPerRoundTable(idle.perRound, idle.marginalPerRound),
    '',
  ];
}

function findingsSection(summary: Summary): string[] {
  const found = findings(summary);
  return found.length > 0 ? ['## Other measured findings', '', ...found.flatMap((p) => [p, ''])] : [];
}

function pricesSection(): string[] {
  return [
    '## Prices used',
    '',
    `Checked ${PRICES.checked}; ${PRICES.region}.`,
    '',
    '| Item | Price | Source |',
    '|---|---|---|',
    ...PRICE_SOURCES.map((p) => `| ${p.item} | ${p.price} | ${p.source} |`),
    '',
  ];
}

/** `shapesChart`: the chart of the cost by traffic shape, when the run measured it. */
export function markdown(
  meta: BenchMeta,
  config: BenchConfig,
  summary: Summary,
  chartFile: string,
  shapesChart?: string,
): string {
  return [
    ...headerSection(meta, config, summary, chartFile),
    ...missesSection(summary),
    ...perBatchSection(meta, summary),
    ...costSection(summary),
    ...(summary.shapes && shapesChart ? shapesSection(summary.shapes, shapesChart) : []),
    ...idleSection(summary.idle),
    ...findingsSection(summary),
    ...methodSection(config.steady),
    ...pricesSection(),
  ].join('\n');
}
