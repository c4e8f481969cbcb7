/** A missed throughput ratio: where each lane's time per batch went, and how much of it must go. */
import { cpuSentence, dynamoByPart } from '../explain.ts';
import { fmt, fmtSpread } from '../format.ts';
import type { CellCounts, Row, Summary } from '../summary-model.ts';
import type { Spread } from '../support/stats.ts';

/** A lane's time per batch on each side: concurrency × messages per batch ÷ messages per second. */
function laneTimes(host: Spread, baseline: Spread, c: CellCounts, target: number): string[] {
  const hostMs = (c.concurrency * c.messagesPerBatch.median * 1000) / host.median;
  const baseMs = (c.concurrency * c.batchSize * 1000) / baseline.median;
  const pb = c.perBatch;
  const baseSqs = Number.isFinite(c.baselineSqsPerBatch.median)
    ? `, making ${fmtSpread(c.baselineSqsPerBatch, 1)} SQS requests and nothing else`
    : '';
  return [
    `Each lane spent ${fmt(hostMs, 1)} ms per batch of ${fmt(c.messagesPerBatch.median, 1)} messages;` +
      ` the raw loop ${fmt(baseMs, 1)} ms per batch of ${c.batchSize}${baseSqs}.`,
    `Per batch the Host made ${fmtSpread(pb.sqsRequests, 1)} SQS requests, ${fmtSpread(pb.dynamoRequests, 1)} DynamoDB requests,` +
      ` ${fmtSpread(pb.lambda, 2)} Lambda invocations and ${fmtSpread(pb.transitions, 2)} state transitions;` +
      ` the DynamoDB requests by part: ${dynamoByPart(c.breakdown)}.`,
    `What would close it: a lane needs ≤ ${fmt(baseMs / target, 1)} ms per batch` +
      ` (${fmt(Math.max(0, hostMs - baseMs / target), 1)} ms less than now), by fewer or cheaper Host calls per batch` +
      ' (a lane already receives its next batch while the handler runs, which saves the receive round trips,' +
      " not the Host's work).",
  ];
}

export function throughputMiss(s: Summary, r: Row, c: CellCounts | undefined): string {
  const target = Number(r.target?.match(/[\d.]+$/)?.[0]);
  const runs = s.throughputRatios[c?.id ?? ''] ?? [];
  const setting = r.setting.replace(/, \d+ msgs$/, '');
  const against = r.target?.replace('Host ÷ baseline ', '');
  const below = runs.filter((x) => x < target).length;
  const parts = [
    `**Throughput ratio (${setting}): ${fmtSpread(r.ratio, 2)} against ${against} — missed** (below it in ${below} of ${runs.length} runs).`,
  ];
  if (c && r.baseline) {
    parts.push(...laneTimes(r.host, r.baseline, c, target));
    if (c.cpu) parts.push(cpuSentence(c.cpu, target));
  }
  return parts.join(' ');
}
