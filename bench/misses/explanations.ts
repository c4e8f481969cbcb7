/**
 * Why each missed target was missed, and what would close it, in the order of the results table;
 * written from this run's numbers only (calls per batch by part, items they named, times per batch).
 */
import { byKey, missed } from '../explain.ts';
import { fmt, fmtSpread } from '../format.ts';
import type { Row, Summary } from '../summary-model.ts';
import { costMisses } from './cost.ts';
import { dynamoMisses } from './dynamo.ts';
import { throughputMiss } from './throughput.ts';
import { utilisationMiss } from './utilisation.ts';

const missedWith = (s: Summary, prefix: string) =>
  s.rows.filter((x) => x.key?.startsWith(prefix) && missed(x));

function idleMiss(s: Summary, idle: Row): string {
  const b = s.idle.breakdownOne;
  const parts = [
    `SQS $${fmt(b.sqs, 3)}`,
    `DynamoDB $${fmt(b.dynamoReads + b.dynamoWrites, 3)}`,
    `Lambda $${fmt(b.lambdaRequests + b.lambdaDuration, 3)}`,
    `CloudWatch $${fmt(b.cloudwatch, 3)}`,
    `CloudWatch Logs $${fmt(b.logs, 3)}`,
  ].join(', ');
  return (
    `**Idle cost: $${fmtSpread(idle.host, 3)} per month against ≤ $1 — missed.**` +
    ` By part per month: ${parts} (calls per round in the idle section).`
  );
}

function arrivalMiss(s: Summary, r: Row): string {
  const p50 = byKey(s, r.key?.replace(/:p99$/, ':p50') ?? '');
  const median = p50 && p50 !== r ? ` (p50 ${fmtSpread(p50.host, 0)} ms)` : '';
  return `**${r.figure} (${r.setting}): ${fmtSpread(r.host, 0)} ms against ${r.target} — missed**${median}.`;
}

function acknowledgeMiss(s: Summary, ack: Row): string {
  const calls = Object.entries(s.callsPerSettle)
    .sort()
    .map(([op, n]) => `${fmt(n, 2)} ${op}`)
    .join(', ');
  return (
    `**acknowledge() p99: ${fmtSpread(ack.host, 1)} ms, ${fmtSpread(ack.ratio, 2)}× the bare conditional write — missed.**` +
    ` The Host made ${calls || 'no counted calls'} per settlement call; one conditional write per call would match the baseline.`
  );
}

export function explanations(s: Summary): string[] {
  const out: string[] = [];
  for (const r of missedWith(s, 'throughput:')) {
    out.push(
      throughputMiss(
        s,
        r,
        s.cells.find((c) => c.kind === 'drain' && `throughput:${c.id}` === r.key),
      ),
    );
  }
  const handlers = byKey(s, 'utilisation:handlers');
  if (missed(handlers)) out.push(utilisationMiss(s, handlers));
  const dynamo = missedWith(s, 'dynamo:');
  if (dynamo.length > 0) out.push(dynamoMisses(s, dynamo));
  const cost = missedWith(s, 'cost:');
  if (cost.length > 0) out.push(costMisses(s, cost));
  const shapes = missedWith(s, 'shape:');
  if (shapes.length > 0)
    out.push(
      `**Cost by traffic shape: missed at ${shapes.map((r) => r.setting).join(', ')}** — why, rate by rate, from the counts: under Cost by traffic shape below.`,
    );
  const idle = byKey(s, 'idle:one');
  if (missed(idle)) out.push(idleMiss(s, idle));
  for (const r of missedWith(s, 'arrival:')) out.push(arrivalMiss(s, r));
  const ack = byKey(s, 'settle:acknowledge():p99');
  if (missed(ack)) out.push(acknowledgeMiss(s, ack));
  return out;
}
