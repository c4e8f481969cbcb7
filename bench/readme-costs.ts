/**
 * The cost table of docs/costs.md, regenerated from a bench run: the text between the two markers
 * is replaced by `npm run bench` (full runs only) and by `--from`, so the page never carries
 * hand-written per-batch figures that the data path has outgrown.
 */
import { dynamoByPart, referenceCells } from './explain.ts';
import { fmt } from './format.ts';
import { PRICES } from './pricing.ts';
import type { Summary } from './report.ts';
import type { BenchMeta } from './results-model.ts';

export const COSTS_START = '<!-- bench:costs:start -->';
export const COSTS_END = '<!-- bench:costs:end -->';
/** The cost by traffic shape (`shapes/render.ts`), a region of its own on the same page. */
export const SHAPES_START = '<!-- bench:shapes:start -->';
export const SHAPES_END = '<!-- bench:shapes:end -->';

export interface RegionMarkers {
  start: string;
  end: string;
}

export const COSTS_MARKERS: RegionMarkers = { start: COSTS_START, end: COSTS_END };
export const SHAPES_MARKERS: RegionMarkers = { start: SHAPES_START, end: SHAPES_END };

/** The Markdown between the markers (without them). `resultsLink` is relative to the page. */
export function costsRegion(meta: BenchMeta, summary: Summary, resultsLink: string): string {
  const verdictOf = (key: string) => {
    const r = summary.rows.find((x) => x.key === key);
    return r?.target ? `${r.target} ${r.verdict}` : '—';
  };
  const lines = [
    `Measured by \`npm run bench\`${meta.commit ? ` at \`${meta.commit}\`` : ''} on ${meta.date} ([results](${resultsLink})) on the local stand-ins, per finalised batch on the happy path (the handler returns; no explicit ack). USD per million messages include the producer and, for a drain (one burst), its lanes' ends after the last message (each lane's last idle wait at the bench's 1 s, and its execution's end), at list prices (${PRICES.region}; checked ${PRICES.checked}). Generated: \`npm run bench\` rewrites this part of the page and \`npm run bench -- --from bench/results/<date>.json\` re-renders it; edits here are lost.`,
    '',
    '| Cell | Messages / batch | Step Functions transitions / batch | Lambda invocations / batch | DynamoDB requests / batch (WRU, RRU) | SQS requests / batch | USD per million messages |',
    '|---|---|---|---|---|---|---|',
  ];
  for (const c of summary.cells) {
    const p = c.perBatch;
    const target = c.kind === 'drain' ? ` (${verdictOf(`cost:${c.id}`)})` : '';
    lines.push(
      `| ${c.label} | ${fmt(c.messagesPerBatch.median, 1)} | ${fmt(p.transitions.median, 2)} | ${fmt(p.lambda.median, 2)} | ${fmt(p.dynamoRequests.median, 1)} (${fmt(p.wru.median, 1)}, ${fmt(p.rru.median, 1)}) | ${fmt(p.sqsRequests.median, 1)} | $${fmt(c.perMillion.median, 3)}${target} |`,
    );
  }
  lines.push('');
  for (const c of referenceCells(summary)) {
    const b = c.breakdown;
    const per = (m: Record<string, number>) =>
      Object.entries(m)
        .sort(([x], [y]) => x.localeCompare(y))
        .map(([k, n]) => `${k} ${fmt(n / Math.max(1, b.batches), 2)}`)
        .join(', ');
    lines.push(
      `By part, ${c.label}: Lambda — ${per(b.lambda) || 'none'}; Step Functions — ${per(b.transitions) || 'none'}; DynamoDB — ${dynamoByPart(b, false) || 'none'} (by item kind in the results).`,
      '',
    );
  }
  lines.push(
    `Idle: a Host whose one consumer is idle $${fmt(summary.idle.hostWithOneIdleConsumer.median, 3)} per month (the supervisor's round every minute), each further idle consumer $${fmt(summary.idle.perExtraConsumer.median, 3)}.`,
  );
  return lines.join('\n');
}

/** `page` with its marked region replaced; throws when the markers are missing or repeated. */
export function replaceCostsRegion(page: string, region: string, markers = COSTS_MARKERS): string {
  // Markers count only as whole lines, so prose may name them.
  const lines = page.split('\n');
  const starts = lines.flatMap((l, i) => (l.trim() === markers.start ? [i] : []));
  const ends = lines.flatMap((l, i) => (l.trim() === markers.end ? [i] : []));
  const [start] = starts;
  const [end] = ends;
  if (starts.length !== 1 || ends.length !== 1 || start === undefined || end === undefined || end < start)
    throw new Error(`the costs page needs exactly one ${markers.start} … ${markers.end} region`);
  return [...lines.slice(0, start + 1), region, ...lines.slice(end)].join('\n');
}
