/**
 * What an idle Host costs a month: the supervisor's round every minute with one idle consumer,
 * what each further consumer adds, and one lane's life on an empty queue.
 */
import { isDelivery } from '../per-batch.ts';
import { type CostBreakdown, lambdaUsage, scale, transitionsOf, usd } from '../pricing.ts';
import type { LaneEndSample, SupervisorSample } from '../scenarios/idle.ts';
import type { IdleSummary, LaneEndCost, Row } from '../summary-model.ts';
import { addTallies, sumSdk, type Tally } from '../support/meter.ts';
import { spread } from '../support/stats.ts';
import { medianBreakdown } from './cost.ts';
import { judge, TARGETS } from './targets.ts';

const MINUTES_PER_MONTH = 30 * 24 * 60;

/** A run's rounds scaled to a month of one round a minute; `metrics` are the queues CloudWatch is asked about. */
const monthlyParts = (t: Tally, rounds: number, metrics: number) =>
  scale(
    usd(t, () => true, metrics),
    MINUTES_PER_MONTH / Math.max(1, rounds),
  );
const monthly = (t: Tally, rounds: number, metrics: number) => monthlyParts(t, rounds, metrics).total;

function extraConsumerParts(x: SupervisorSample): CostBreakdown {
  const two = monthlyParts(x.twoConsumers, x.rounds, 2);
  const one = monthlyParts(x.oneConsumer, x.rounds, 1);
  return Object.fromEntries(
    Object.entries(two).map(([k, v]) => [k, v - one[k as keyof CostBreakdown]]),
  ) as unknown as CostBreakdown;
}

/** SDK calls per round with one consumer, and what a second consumer adds to a round. */
function callsPerRound(sup: SupervisorSample[]) {
  const perRound: Record<string, number> = {};
  const marginalPerRound: Record<string, number> = {};
  if (sup.length > 0) {
    const rounds = sup.reduce((a, x) => a + x.rounds, 0);
    const oneOps = sumSdk(addTallies(sup.map((x) => x.oneConsumer)), () => true).byOp;
    const twoOps = sumSdk(addTallies(sup.map((x) => x.twoConsumers)), () => true).byOp;
    for (const [k, v] of Object.entries(oneOps)) perRound[k] = v.calls / rounds;
    for (const [k, v] of Object.entries(twoOps))
      marginalPerRound[k] = (v.calls - (oneOps[k]?.calls ?? 0)) / rounds;
  }
  return { perRound, marginalPerRound };
}

/** `ok` is the lane-end runs that finished; none gives no figure. */
function laneEndCost(ok: LaneEndSample[]): LaneEndCost | undefined {
  if (ok.length === 0) return undefined;
  const t = addTallies(ok.map((x) => x.tally));
  const n = ok.length;
  const sdk = sumSdk(t, isDelivery);
  return {
    idleWaitSeconds: ok[0]!.idleWaitSeconds,
    transitions: transitionsOf(t) / n,
    lambda: Object.values(t.lambda).reduce((a, l) => a + l.invocations, 0) / n,
    sqs: sdk.sqsRequests / n,
    dynamoCalls: sdk.dynamoCalls / n,
    usd: usd(t, isDelivery).total / n,
    gbSeconds: lambdaUsage(t).gbSeconds / n,
  };
}

export function idleSummary(sup: SupervisorSample[], laneEnds: LaneEndSample[]): IdleSummary {
  const { perRound, marginalPerRound } = callsPerRound(sup);
  return {
    hostWithOneIdleConsumer: spread(sup.map((x) => monthly(x.oneConsumer, x.rounds, 1))),
    perExtraConsumer: spread(
      sup.map((x) => monthly(x.twoConsumers, x.rounds, 2) - monthly(x.oneConsumer, x.rounds, 1)),
    ),
    breakdownOne: medianBreakdown(sup.map((x) => monthlyParts(x.oneConsumer, x.rounds, 1))),
    breakdownExtra: medianBreakdown(sup.map(extraConsumerParts)),
    perRound,
    marginalPerRound,
    roundMs: spread(sup.flatMap((x) => x.roundMs)),
    laneEnd: laneEndCost(laneEnds.filter((x) => x.ok)),
  };
}

export function idleRows(idle: IdleSummary): Row[] {
  const one = idle.hostWithOneIdleConsumer;
  return [
    {
      key: 'idle:one',
      group: 'Cost',
      figure: 'idle: a Host whose one consumer is idle',
      setting: 'supervisor round every minute, 30-day month',
      unit: 'USD/month',
      host: one,
      baselineLabel: 'Cloudflare (no invocation on an empty queue)',
      baseline: spread([0]),
      target: `≤ $${TARGETS.idleMonthlyUsd}`,
      verdict: judge(one.median, (v) => v <= TARGETS.idleMonthlyUsd),
      digits: 3,
    },
    {
      group: 'Cost',
      figure: 'idle: each further idle consumer',
      setting: 'marginal supervisor work per consumer',
      unit: 'USD/month',
      host: idle.perExtraConsumer,
      target: `≤ $${TARGETS.idleConsumerMonthlyUsd}`,
      verdict: judge(idle.perExtraConsumer.median, (v) => v <= TARGETS.idleConsumerMonthlyUsd),
      digits: 3,
    },
  ];
}
