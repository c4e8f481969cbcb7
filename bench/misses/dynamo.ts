/** Missed DynamoDB requests per batch: the requests of each missing cell by part, and which reads repeat. */
import { dynamoByPart, referenceCells } from '../explain.ts';
import { fmt, fmtSpread } from '../format.ts';
import { kindsRead, manifestWruPerBatch, readAndWritten } from '../part-items.ts';
import type { PartBreakdown } from '../per-batch.ts';
import type { CellCounts, Row, Summary } from '../summary-model.ts';

const SHARD_READS =
  " (DISPATCH/shard: the slot map's other shards, read as items of the registration's one BatchGetItem," +
  ' which a take that saw one shard needs; they add read units, not requests.)';

const LANE_START_CAUSE =
  ' lanes started by full batches while the bound was all but reached' +
  ' (the doubling of lanes for a backlog; the lanes of a supervisor round start none from their first batch),' +
  ' each paying its take (and, once refused, a read of every shard);' +
  ' starting such lanes only in proportion to the free slots the registration read would close this part.';

/**
 * What lane starts (the AcquireSlot step) cost a cell, when they make more than half a request
 * per batch: mostly lanes started for a backlog that find the bound reached.
 */
function laneStarts(b: PartBreakdown): string {
  const ops = b.ops['step:AcquireSlot'] ?? {};
  let requests = 0;
  let refused = 0;
  for (const [key, e] of Object.entries(ops)) {
    if (!key.startsWith('DynamoDB:')) continue;
    requests += e.calls;
    refused += e.refusedWrites;
  }
  const n = Math.max(1, b.batches);
  const starts = b.lambda['step:AcquireSlot'] ?? 0;
  if (requests / n <= 0.5) return '';
  return (
    ` Lane starts (step:AcquireSlot, ${fmt(starts / n, 2)} per batch) made ${fmt(requests / n, 2)} requests per batch,` +
    ` ${fmt(refused / n, 2)} of them writes refused by a full shard or a full slot map:` +
    LANE_START_CAUSE
  );
}

/** One cell's DynamoDB requests by part, with the reads that repeat or that a condition could replace. */
function cellRequests(c: CellCounts): string {
  const b = c.breakdown;
  const both = readAndWritten(b);
  const reads = kindsRead(b);
  const repeated = Object.entries(reads)
    .filter(([, n]) => n / Math.max(1, b.batches) > 1.05)
    .sort(([x], [y]) => x.localeCompare(y))
    .map(([k, n]) => `${k} ${fmt(n / Math.max(1, b.batches), 2)}`);
  return (
    `At ${c.label} (${fmt(b.batches, 0)} batches): ${dynamoByPart(b)}.` +
    (repeated.length > 0 ? ` Item kinds read more than once per batch: ${repeated.join(', ')}.` : '') +
    ((reads['DISPATCH/shard'] ?? 0) > 0 ? SHARD_READS : '') +
    (both.kinds.length > 0
      ? ` ${fmt(both.readsPerBatch, 2)} reads per batch are of item kinds the same path also writes (${both.kinds.join(', ')}),` +
        ' which a condition on that write could check instead.'
      : '') +
    laneStarts(b)
  );
}

/** The manifest's, head's and mark's writes are requests one transaction could absorb, at a price. */
function manifestFold(cells: CellCounts[]): string {
  const manifest = cells.filter((c) => manifestWruPerBatch(c.breakdown) > 0);
  if (manifest.length === 0) return '';
  const extra = manifest
    .map((c) => `${fmt(manifestWruPerBatch(c.breakdown), 1)} WRU more per batch at ${c.label}`)
    .join(', ');
  return (
    " Registration writes the manifest, the head and the slot's mark as three plain requests;" +
    ` one transaction of the three would be two requests fewer and cost 2 WRU more per batch for head and mark, and ${extra},` +
    ' since a transactional write is billed twice and on-demand DynamoDB bills request units, not requests.'
  );
}

export function dynamoMisses(s: Summary, rows: Row[]): string {
  const list = rows.map((r) => {
    const c = s.cells.find((x) => r.key === `dynamo:${x.kind}:${x.id}`);
    return `${c?.label ?? r.setting}: ${fmtSpread(r.host, 1)}`;
  });
  const out = [
    `**DynamoDB requests per batch: missed in ${rows.length} of ${s.cells.length} cells** against ≤ 6 (${list.join('; ')}).`,
  ];
  const missedCells = rows
    .map((r) => s.cells.find((x) => r.key === `dynamo:${x.kind}:${x.id}`))
    .filter((c): c is CellCounts => c !== undefined);
  // The cells that missed, broken down; with none (an old result), the reference cells.
  for (const c of missedCells.length > 0 ? missedCells : referenceCells(s)) out.push(cellRequests(c));
  out.push(
    'What would close it: removing the requests beyond 6 per batch from the parts above, starting with the repeated reads.' +
      manifestFold(missedCells),
  );
  return out.join(' ');
}
