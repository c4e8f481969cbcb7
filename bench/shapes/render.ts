/**
 * The traffic-shape figures in Markdown: the section of a results document, the document of a
 * shapes-only run (`<date>-shapes.md`), and the region of docs/costs.md between the
 * `bench:shapes` markers. Pure: everything comes from the summary.
 */
import { fmt } from '../format.ts';
import { PART_COLUMNS, usdParts } from '../markdown/tables.ts';
import { PRICES } from '../pricing.ts';
import type { BenchMeta } from '../results-model.ts';
import { dominantPart, shapeMisses } from './misses.ts';
import type { ShapeFigure, ShapesSummary } from './model.ts';
import { targetText } from './summarise.ts';

const row = (cells: string[]) => `| ${cells.join(' | ')} |`;
const separator = (n: number) => `|${Array.from({ length: n }, () => '---').join('|')}|`;
const verdictText = (f: ShapeFigure) => (f.verdict === 'missed' ? '**missed**' : f.verdict);
const howText = (f: ShapeFigure, windowSeconds: number) =>
  f.how === 'stream' ? `stream, ${fmt(windowSeconds, 0)} s window` : `composed: ${f.how}`;

function consumerText(s: ShapesSummary): string {
  const c = s.consumer;
  return (
    `one consumer (maxBatchSize ${c.maxBatchSize}, maxBatchTimeoutSeconds ${c.maxBatchTimeoutSeconds},` +
    ` maxConcurrency ${c.maxConcurrency}) with the idle wait its lanes have on AWS (${s.idleWaitSeconds} s),` +
    ' a handler that only reads its batch, and one send through the Host per message, evenly spaced'
  );
}

/** A stream whose producer fell short of the rate asked: this machine's CPU, not the Host's design. */
const short = (f: ShapeFigure) => f.sentPerSecond !== undefined && f.sentPerSecond < 0.95 * f.rate;

function shortfalls(s: ShapesSummary): string[] {
  return s.figures.flatMap((f) =>
    short(f)
      ? [
          `- ${f.label}: the producer reached ${fmt(f.sentPerSecond ?? Number.NaN, 0)} messages a second of the ${fmt(f.rate, 0)} asked` +
            ` (it fell up to ${fmt(f.producerLagMs ?? Number.NaN, 0)} ms behind) and the handlers started ${fmt(f.handledPerSecond ?? Number.NaN, 0)} a second:` +
            " this machine's two cores, shared by the producer, the Host and both stand-ins, bounded it; the figure is for the rate reached.",
        ]
      : [],
  );
}

function mainTable(s: ShapesSummary): string[] {
  const head = [
    'Arrival rate',
    'How',
    'Messages / batch',
    'Lane starts / 1,000 messages',
    'Worker GB-s / message',
    'Host, USD per million',
    'Lambda + SQS ESM',
    'Cloudflare Queues',
    'Target',
    'Met?',
  ];
  return [
    row(head),
    separator(head.length),
    ...s.figures.map((f) =>
      row([
        f.label,
        howText(f, s.windowSeconds),
        fmt(f.messagesPerBatch, 1),
        fmt(f.perMessage.laneStarts * 1000, 2),
        fmt(f.perMessage.gbSeconds.worker ?? 0, 3),
        `$${fmt(f.perMillion.total, 3)}`,
        `$${fmt(f.esm.total, 3)}`,
        `$${fmt(f.cloudflare, 2)}`,
        targetText(f.target),
        verdictText(f),
      ]),
    ),
  ];
}

function partsTable(s: ShapesSummary): string[] {
  return [
    row(['Arrival rate', ...PART_COLUMNS, '**Total**']),
    separator(PART_COLUMNS.length + 2),
    ...s.figures.map((f) => row([f.label, ...usdParts(f.perMillion), `**${fmt(f.perMillion.total, 3)}**`])),
  ];
}

function episodeLines(s: ShapesSummary): string[] {
  const e = s.episodes;
  if (!e) return ['- **The sparse rates**: not composed in this run (an episode failed; see below).'];
  const iso = e.isolated;
  const alive = e.keptAlive;
  return [
    `- **The sparse rates, composed.** Two episodes measured in the same run, each on a Host of its own with the ${s.idleWaitSeconds} s idle wait, counted from the first send until every lane had ended (so the Express execution and the last worker invocation, billed at their end, are in it).` +
      ` An isolated message: one send to a consumer with no lane that has run one message before — a lane start, a batch of one gathered for the batch window, one more poll, the lane's end — ${fmt(iso.seconds, 1)} s, $${fmt(iso.usd * 1e6, 1)} per million such episodes, ${fmt(iso.counts.gbSeconds.worker ?? 0, 2)} GB-s of worker invocations.` +
      ` A kept-alive lane: ${alive.messages} messages ${fmt(alive.gapSeconds, 0)} s apart, each sent while the lane of the one before may still run, ${fmt(alive.seconds, 1)} s in all, $${fmt(alive.usd * 1e6, 1)} per million such episodes.` +
      ` A rate whose gap is at least the isolated episode (1 a minute) costs that episode per message; a shorter gap (1 every 10 s) costs what each further message added to the kept-alive episode, (kept-alive − isolated) ÷ ${alive.messages - 1}, with the lane's wait stretched to the gap at the price of a second of it (a worker invocation at ${PRICES.lambdaMemoryMb.worker} MB and an Express execution).`,
    "- **What the composition leaves out.** Arrivals that are not evenly spaced: random ones at the same mean bunch up (sharing lanes and batches) and leave longer gaps (ending lanes). An Express lane's hand-over to a new execution every few minutes of a long trickle (an execution request and an AcquireSlot, a few cents per million at 1 every 10 s). Worker invocations return to their lane after 30 s locally but run on towards their timeout on AWS, so the bench counts more rounds (an AcquireSlot and a worker request each) than AWS would. Cold starts. Messages sent straight to SQS or by the producer client, which wake no lane (below).",
    ...pickupLines(s),
  ];
}

/** How long a message no wake announces waits, as measured. */
function pickupLines(s: ShapesSummary): string[] {
  const p = s.pickup;
  if (!p) return ['- **Messages sent straight to SQS**: not measured in this run (see the errors below).'];
  return [
    `- **Messages sent straight to SQS** wake no lane: the supervisor's round, every ${fmt(p.supervisorSeconds, 0)} s as on AWS, starts one for them.` +
      ` One sent just after a round, to a consumer with no lane, was finalised ${fmt(p.seconds, 1)} s later: the wait such a message has at most, plus the round's own time (SQS's message counts may lag behind on AWS).` +
      ' While they keep coming, the lane they started keeps waiting for the next (the idle wait).',
  ];
}

function methodLines(s: ShapesSummary): string[] {
  return [
    `- **Streams** (1 a second and more): the producer sends each message alone through the Host at the rate, for a warm-up and then a ${fmt(s.windowSeconds, 0)} s window;` +
      ' inside the window, calls count where they happen and the durations of the worker invocations and Express executions running in it are cut at its edges;' +
      ' USD per million divide by the messages sent in the window. Lanes the stream starts and that end inside it (a lane whose queue ran dry) are in it;' +
      " the stream's own end, the lanes running when the producer stopped, is counted apart, once (below).",
    ...episodeLines(s),
    `- **Lambda + SQS event source mapping**, from the same prices: one SendMessage per message; batches as this consumer's — up to ${s.consumer.maxBatchSize} messages, a batching window of ${s.consumer.maxBatchTimeoutSeconds} s, so with evenly spaced arrivals the first message opens the window and those arriving inside it join (min(${s.consumer.maxBatchSize}, ⌊rate × ${s.consumer.maxBatchTimeoutSeconds} s⌋ + 1));` +
      ` ⌈n/10⌉ ReceiveMessage and ⌈n/10⌉ DeleteMessageBatch per batch (receives that return fewer than 10, as pollers get at low rates, would add requests: this is the mapping's least);` +
      ` one Lambda request per batch, the handler's own work (${fmt(s.handlerMs, 3)} ms, billed at Lambda's 1 ms at least) at ${PRICES.lambdaMemoryMb.worker} MB, and Lambda's START, END and REPORT lines; nothing for its pollers or their empty receives.`,
    `- **Cloudflare Queues**: $${fmt(PRICES.cloudflareQueuesPerMillionMessages, 2)} per million messages (three operations of $0.40 per million each), at every rate.`,
  ];
}

function tailLines(s: ShapesSummary): string[] {
  return s.figures.flatMap((f) => {
    const t = f.tail;
    if (!t) return [];
    const hour = f.rate * 3600;
    return [
      `- ${f.label}: the ${t.lanes} lane${t.lanes === 1 ? '' : 's'} running when the producer stopped ${t.ended ? `had ended ${fmt(t.seconds, 1)} s later` : `had not all ended after ${fmt(t.seconds, 1)} s`};` +
        ` the stream's end cost $${fmt(t.usd, 6)} once — $${fmt((t.usd * 1e6) / hour, 3)} per million over an hour of the stream.`,
    ];
  });
}

const shapeCount = (s: ShapesSummary) => {
  const judged = s.figures.filter((f) => f.verdict !== '—');
  return { met: judged.filter((f) => f.verdict === 'met').length, judged: judged.length };
};

export function shapesSection(s: ShapesSummary, chartFile: string): string[] {
  const count = shapeCount(s);
  const misses = shapeMisses(s);
  const short = shortfalls(s);
  return [
    '## Cost by traffic shape',
    '',
    `USD per million messages at each arrival rate, for ${consumerText(s)}; beside each, Lambda with an SQS event source mapping and Cloudflare Queues at the same rate.` +
      ` **Shape targets met: ${count.met} of ${count.judged}** (reported, not asserted).`,
    '',
    `![USD per million messages vs arrival rate](${chartFile})`,
    '',
    ...mainTable(s),
    ...(short.length > 0 ? ['', ...short] : []),
    '',
    '### By part, USD per million messages',
    '',
    ...partsTable(s),
    '',
    ...(misses.length > 0
      ? ['### Why each shape target was missed', '', ...misses.flatMap((m) => [m, ''])]
      : []),
    '### How the figures are made, and what they leave out',
    '',
    ...methodLines(s),
    '',
    ...(tailLines(s).length > 0 ? ["### The streams' ends", '', ...tailLines(s), ''] : []),
    ...(s.errors.length > 0 ? ['### Runs that failed', '', ...s.errors.map((e) => `- ${e}`), ''] : []),
  ];
}

export const shapesCommand = (mode: ShapesSummary['mode']) =>
  `npm run bench -- ${mode === 'quick' ? '--quick ' : ''}--scenario shapes`;

/** `bench/results/<date>-shapes.md`: the run, then the section. */
export function shapesDocument(meta: BenchMeta, s: ShapesSummary, chartFile: string): string {
  return [
    `# Cost by traffic shape — ${meta.date}${s.mode === 'quick' ? ' (quick smoke run)' : ''}`,
    '',
    `Measured by \`${shapesCommand(s.mode)}\`${meta.commit ? ` at \`${meta.commit}\`` : ''} on ${meta.cpus} × ${meta.cpuModel}, ` +
      `${meta.platform}, Node ${meta.node}; wall time ${fmt(meta.wallSeconds, 0)} s; load average ` +
      `${meta.loadAverageAtStart.map((v) => v.toFixed(2)).join(' ')} at start (the machine is shared).` +
      ` Prices: ${PRICES.region}, checked ${PRICES.checked}.`,
    '',
    ...shapesSection(s, chartFile),
  ].join('\n');
}

/**
 * The region of docs/costs.md: what was measured and how, the chart and one row per rate.
 * `links` are relative to the page; `command` is the run's (a full bench or the shapes scenario).
 */
export function shapesRegion(
  meta: BenchMeta,
  s: ShapesSummary,
  links: { results: string; chart: string },
  command: string,
): string {
  const quick = s.mode === 'quick' ? ` — a quick smoke run with ${fmt(s.windowSeconds, 0)} s windows` : '';
  const head = [
    'Arrival rate',
    'Host, USD per million',
    'Most of it',
    'Lambda + SQS ESM',
    'Cloudflare Queues',
    'Target',
    'Met?',
  ];
  return [
    `Measured by \`${command}\`${meta.commit ? ` at \`${meta.commit}\`` : ''} on ${meta.date} ([results](${links.results})${quick}) on the local stand-ins, for ${consumerText(s)}.` +
      ` Rates of a message a second and more are measured as streams; 1 every 10 s and 1 a minute are composed from an isolated message and a kept-alive lane measured in the same run (the results say how, and what that leaves out).` +
      ` Prices: ${PRICES.region}, checked ${PRICES.checked}. Generated by the bench; edits here are lost.`,
    '',
    `![USD per million messages vs arrival rate](${links.chart})`,
    '',
    row(head),
    separator(head.length),
    ...s.figures.map((f) =>
      row([
        `${f.label}${f.how === 'stream' ? '' : ' (composed)'}${short(f) ? ` (this machine reached ${fmt(f.sentPerSecond ?? 0, 0)})` : ''}`,
        `$${fmt(f.perMillion.total, 3)}`,
        dominantPart(f),
        `$${fmt(f.esm.total, 3)}`,
        `$${fmt(f.cloudflare, 2)}`,
        targetText(f.target),
        f.verdict,
      ]),
    ),
  ].join('\n');
}
