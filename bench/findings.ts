/** Measured observations beside the targets, with no verdicts: what the report notes without judging. */
import { byKey } from './explain.ts';
import { fmt, fmtSpread } from './format.ts';
import { wruPerWriteRequest } from './part-items.ts';
import type { CellCounts, Summary } from './summary-model.ts';

function steadyFinding(s: Summary, c: CellCounts): string | undefined {
  const tp = byKey(s, `steady:${c.id}:throughput`);
  const p99 = byKey(s, `steady:${c.id}:p99`);
  if (!tp || !p99 || c.rate === undefined) return undefined;
  // The raw loop under the same producer shows what the stand-ins let through.
  const behind = (tp.baseline?.median ?? c.rate) - tp.host.median;
  return (
    `**Steady stream, ${c.label}**: the Host handled ${fmtSpread(tp.host, 0)} msg/s of the ${fmt(c.rate, 0)} sent,` +
    ` the raw loop ${fmtSpread(tp.baseline, 0)};` +
    ` send → handler p99 ${fmtSpread(p99.host, 0)} ms against the raw loop's ${fmtSpread(p99.baseline, 0)} ms` +
    (behind > 0.05 * c.rate
      ? `; about ${fmt(behind, 0)} msg/s more than the Host handled queued up during the window,` +
        ` with ${fmtSpread(c.perBatch.dynamoRequests, 1)} DynamoDB requests per batch of ${fmtSpread(c.messagesPerBatch, 1)} messages.`
      : '.')
  );
}

/** Batch 10 at the lowest and highest concurrency: how a write request's size grew with contention. */
function writeSizeFinding(s: Summary): string | undefined {
  const b10 = s.cells.filter((c) => c.kind === 'drain' && c.batchSize === 10);
  const low = b10[0];
  const high = b10.at(-1);
  if (!low || !high || low === high) return undefined;
  return (
    `**Write size and concurrency**: at batch 10, a DynamoDB write request cost ${fmt(wruPerWriteRequest(low.breakdown), 2)} WRU` +
    ` on average at concurrency ${low.concurrency} and ${fmt(wruPerWriteRequest(high.breakdown), 2)} at concurrency ${high.concurrency};` +
    ` WRU per batch ${fmtSpread(low.perBatch.wru, 2)} and ${fmtSpread(high.perBatch.wru, 2)}.`
  );
}

function laneEndFinding(s: Summary): string | undefined {
  const tail = s.costs.find((c) => c.batchSize === 100 && c.concurrency === 10)?.tailPerLane;
  const le = s.idle.laneEnd;
  if (!tail && !le) return undefined;
  return (
    '**How lanes end**: ' +
    (tail
      ? `after a batch 100 / concurrency 10 drain, per lane, ${fmt(tail.transitions, 1)} transitions,` +
        ` ${fmt(tail.lambda, 1)} Lambda invocations, ${fmt(tail.sqs, 1)} SQS requests and ${fmt(tail.dynamoCalls, 1)} DynamoDB requests` +
        ' were made after the last message was finalised. '
      : '') +
    (le
      ? `One lane started on an empty queue (idleWaitSeconds ${le.idleWaitSeconds}) made ${fmt(le.transitions, 1)} transitions,` +
        ` ${fmt(le.lambda, 1)} Lambda invocations (${fmt(le.gbSeconds, 2)} GB-s), ${fmt(le.sqs, 1)} SQS` +
        ` and ${fmt(le.dynamoCalls, 1)} DynamoDB requests: $${fmt(le.usd * 1e6, 0)} per million lane ends.`
      : '')
  );
}

export function findings(s: Summary): string[] {
  const steady = s.cells.filter((x) => x.kind === 'steady').map((c) => steadyFinding(s, c));
  return [...steady, writeSizeFinding(s), laneEndFinding(s)].filter((f): f is string => f !== undefined);
}
