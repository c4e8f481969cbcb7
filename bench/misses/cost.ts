/**
 * Missed cost cells: each cell's total by part, what it would cost without the manifest's write
 * and with lanes that run on, and the floor the recovery design sets.
 */
import { type CostCloser, costCloser, SQS_FLOOR_REQUESTS_PER_MESSAGE } from '../cost-closer.ts';
import { fmt, fmtSpread } from '../format.ts';
import { manifestWruPerBatch } from '../part-items.ts';
import type { CellCost, CellCounts, Row, Summary } from '../summary-model.ts';
import { roundsAfterLastMessage, whyTheTwoPartsStay } from './cost-design.ts';

/** The cell's parts, most expensive first, each with the count it comes from. */
function partsOf(c: CellCost, counts: CellCounts | undefined): string {
  const b = c.breakdown;
  const pb = counts?.perBatch;
  const parts: [string, number, string][] = [
    [
      'DynamoDB writes',
      b.dynamoWrites,
      counts && pb
        ? `${fmt(pb.wru.median, 1)} WRU/batch, ${fmt(manifestWruPerBatch(counts.breakdown), 1)} of them the manifest`
        : '',
    ],
    ['DynamoDB reads', b.dynamoReads, pb ? `${fmt(pb.rru.median, 1)} RRU/batch` : ''],
    ['Step Functions', b.stepFunctions, pb ? `${fmt(pb.transitions.median, 2)} transitions/batch` : ''],
    ['SQS', b.sqs, `${fmtSpread(c.sqsPerMessage, 2)} requests/message`],
    [
      'Lambda',
      b.lambdaRequests + b.lambdaDuration,
      pb ? `${fmt(pb.lambda.median, 2)} invocations/batch` : '',
    ],
    ['CloudWatch Logs', b.logs, ''],
  ];
  return parts
    .filter(([, usd]) => usd > 0)
    .sort((x, y) => y[1] - x[1])
    .map(([name, usd, per]) => `${name} $${fmt(usd, 3)}${per ? ` (${per})` : ''}`)
    .join(', ');
}

/** What the cell would cost without both design parts, and what its target leaves otherwise. */
function closerSentence(setting: string, c: CellCost, k: CostCloser, limit: number): string {
  const tail = c.tailPerLane;
  const verdict =
    k.withoutBoth <= limit ? 'under the target' : `still $${fmt(k.withoutBoth - limit, 3)} over`;
  const moreRounds = tail.rounds >= 0.05 ? `, in ${fmt(tail.rounds, 1)} more rounds per lane` : '';
  const lanes =
    `${fmt(k.lanes, 0)} lanes ran ${fmt(k.batchesPerLane, 1)} batches and ${fmt(k.transitionsPerLane, 1)} transitions each,` +
    ` ${fmt(tail.transitions, 1)} of them after the last message${moreRounds}`;
  const budget =
    k.wruBudgetPerBatch > 0
      ? `${fmt(k.wruBudgetPerBatch, 1)} WRU per batch for the Host's writes`
      : 'no room for any write';
  return (
    `${setting}: without the manifest's write ($${fmt(k.handlesUsd, 3)}, nearly all receipt handles)` +
    ` and with lanes that run on ($${fmt(k.stepFunctionsUsd, 3)} now: ${lanes}), $${fmt(k.withoutBoth, 3)}, ${verdict}` +
    (k.withoutBoth > limit
      ? `; with lanes that run on and every other part as measured, the target leaves ${budget}` +
        ` (now ${fmt(k.wruPerBatch, 1)}, ${fmt(k.wruPerBatch - k.manifestWruPerBatch, 1)} without the manifest)`
      : '') +
    '.' +
    (k.floorUsd > limit
      ? ' While every receipt handle is recorded before its handler runs (the recovery below), this target is out of reach:' +
        ` SQS's send, receive and delete of each message (${SQS_FLOOR_REQUESTS_PER_MESSAGE} requests per message)` +
        ` and the manifest come to $${fmt(k.floorUsd, 3)} with the producer's writes, before any Lambda or other write.`
      : '')
  );
}

export function costMisses(s: Summary, rows: Row[]): string {
  const out = [
    `**Cost: missed in ${rows.length} of ${s.costs.length} cells** (Cloudflare Queues: $${fmt(1.2, 2)} per million).`,
  ];
  const producerWru = Object.values(s.producerPer100).reduce((a, p) => a + p.wru, 0);
  const closers: string[] = [];
  for (const r of rows) {
    const c = s.costs.find((x) => x.cell === r.setting);
    const counts = s.cells.find((x) => x.kind === 'drain' && x.label.endsWith(r.setting));
    if (!c) continue;
    const limit = Number(r.target?.replace('≤ $', ''));
    const b = c.breakdown;
    out.push(
      `${r.setting}: $${fmt(b.total, 3)} against ≤ $${fmt(limit, 2)}, $${fmt(b.total - limit, 3)} over — ${partsOf(c, counts)}.`,
    );
    if (!counts) continue;
    const k = costCloser(b, counts, limit, producerWru, c.tailPerLane.transitions);
    closers.push(closerSentence(r.setting, c, k, limit));
  }
  if (closers.length > 0) {
    const steady = s.cells
      .filter((x) => x.kind === 'steady')
      .map((x) => `${x.label}: ${fmtSpread(x.perBatch.transitions, 2)} transitions per batch`)
      .join('; ');
    const rounds = rows
      .map((r) => s.costs.find((x) => x.cell === r.setting))
      .filter((c): c is CellCost => c !== undefined && c.tailPerLane.rounds >= 0.05);
    out.push(
      `What would close it, cell by cell, from the counts above: ${closers.join(' ')}`,
      ...(rounds.length > 0 ? [roundsAfterLastMessage(rounds)] : []),
      whyTheTwoPartsStay(steady),
    );
  }
  return out.join(' ');
}
