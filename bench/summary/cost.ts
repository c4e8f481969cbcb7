/**
 * What a burst of messages costs at list prices: per drain cell, the producer's sends, the drain
 * and the lanes' ends after it, per million messages and by part, against the cost targets.
 */
import { isDelivery } from '../per-batch.ts';
import { type CostBreakdown, PRICES, scale, transitionsOf, usd } from '../pricing.ts';
import type { ThroughputPair } from '../results-model.ts';
import type { Cell } from '../scenarios/throughput.ts';
import type { CellCost, Row, Summary } from '../summary-model.ts';
import { addTallies, sumSdk } from '../support/meter.ts';
import { spread } from '../support/stats.ts';
import { cellId, cellKey } from './cells.ts';
import { judge, TARGETS } from './targets.ts';
import { hostDrains } from './throughput.ts';

/** A burst's cost: the producer's sends, the drain, and the lanes' ends after it (`tail`). */
export function costOfPair(p: ThroughputPair) {
  const all = addTallies([p.host.prefill, p.host.drain, p.host.tail]);
  const total = usd(all, isDelivery);
  const perMillion = scale(total, 1e6 / Math.max(1, p.host.delivered));
  const sdk = sumSdk(all, isDelivery);
  return {
    perMillion,
    sqsPerMessage: sdk.sqsRequests / Math.max(1, p.host.delivered),
    rruPerMessage: sdk.rru / Math.max(1, p.host.delivered),
    wruPerMessage: (sdk.wru + sdk.refusedWrites) / Math.max(1, p.host.delivered),
  };
}

/** Part by part, the median over runs (so the parts need not add up to the median total). */
export function medianBreakdown(list: CostBreakdown[]): CostBreakdown {
  const keys = [
    'sqs',
    'dynamoWrites',
    'dynamoReads',
    'stepFunctions',
    'lambdaRequests',
    'lambdaDuration',
    'cloudwatch',
    'logs',
    'total',
  ] as const;
  const out = {} as CostBreakdown;
  for (const k of keys) out[k] = spread(list.map((b) => b[k])).median;
  return out;
}

/** Per lane, what the lanes did after the drain's last message, median over runs. */
function tailPerLane(cell: Cell, pairs: ThroughputPair[]): CellCost['tailPerLane'] {
  const tails = pairs.map((p) => {
    const lanes = Math.max(1, cell.concurrency);
    const sdk = sumSdk(p.host.tail, isDelivery);
    return {
      transitions: transitionsOf(p.host.tail) / lanes,
      lambda: Object.values(p.host.tail.lambda).reduce((a, l) => a + l.invocations, 0) / lanes,
      sqs: sdk.sqsRequests / lanes,
      dynamoCalls: sdk.dynamoCalls / lanes,
      rounds: (p.host.tail.lambda['worker:InvokeWorker']?.invocations ?? 0) / lanes,
    };
  });
  return {
    transitions: spread(tails.map((t) => t.transitions)).median,
    lambda: spread(tails.map((t) => t.lambda)).median,
    sqs: spread(tails.map((t) => t.sqs)).median,
    dynamoCalls: spread(tails.map((t) => t.dynamoCalls)).median,
    rounds: spread(tails.map((t) => t.rounds)).median,
  };
}

/** The cost row of each drain cell with a finished run, and its breakdown for the report. */
export function drainCosts(cells: Cell[], samples: ThroughputPair[]): { rows: Row[]; costs: CellCost[] } {
  const rows: Row[] = [];
  const costs: CellCost[] = [];
  for (const cell of cells) {
    const pairs = hostDrains(samples, cell);
    if (pairs.length === 0) continue;
    const c = pairs.map(costOfPair);
    const perMillion = spread(c.map((x) => x.perMillion.total));
    const limit = TARGETS.usdPerMillion[cell.batchSize];
    rows.push({
      key: `cost:${cellId(cell.batchSize, cell.concurrency)}`,
      group: 'Cost',
      figure: 'USD per million messages',
      setting: cellKey(cell.batchSize, cell.concurrency),
      unit: 'USD',
      host: perMillion,
      baselineLabel: 'Cloudflare Queues',
      baseline: spread([PRICES.cloudflareQueuesPerMillionMessages]),
      ratio: spread(c.map((x) => x.perMillion.total / PRICES.cloudflareQueuesPerMillionMessages)),
      target: limit !== undefined ? `≤ $${limit.toFixed(2)}` : undefined,
      verdict: limit !== undefined ? judge(perMillion.median, (v) => v <= limit) : '—',
      digits: 3,
    });
    costs.push({
      cell: cellKey(cell.batchSize, cell.concurrency),
      batchSize: cell.batchSize,
      concurrency: cell.concurrency,
      perMillion,
      breakdown: medianBreakdown(c.map((x) => x.perMillion)),
      sqsPerMessage: spread(c.map((x) => x.sqsPerMessage)),
      rruPerMessage: spread(c.map((x) => x.rruPerMessage)),
      wruPerMessage: spread(c.map((x) => x.wruPerMessage)),
      tailPerLane: tailPerLane(cell, pairs),
    });
  }
  return { rows, costs };
}

/** The producer's calls per 100 messages sent, over every pre-fill of a finished drain. */
export function producerPer100(samples: ThroughputPair[]): Summary['producerPer100'] {
  const out: Summary['producerPer100'] = {};
  const ok = samples.filter((p) => p.host.ok);
  const sent = ok.reduce((a, p) => a + p.host.messages, 0);
  const ops = addTallies(ok.map((p) => p.host.prefill)).sdk.producer ?? {};
  for (const [op, e] of Object.entries(ops))
    out[op] = {
      calls: (e.calls * 100) / Math.max(1, sent),
      wru: (e.wru * 100) / Math.max(1, sent),
    };
  return out;
}
