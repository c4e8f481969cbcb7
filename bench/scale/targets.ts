/**
 * The scale targets with met or missed, each miss explained from the case's counts: which item,
 * which call, how many. Pure: the unit test reads these.
 */
import { SUPERVISE_PARALLEL } from '../../lambdas/delivery/supervision.ts';
import { fmt } from '../format.ts';
import type { Verdict } from '../summary-model.ts';
import type { CaseSample, ScaleSamples } from './model.ts';
import {
  AWS_CALL_MS,
  type CaseFigures,
  caseFigures,
  idleUsdPerConsumer,
  roundAtTarget,
  SCALE_TARGETS,
  stormLost,
} from './project.ts';

export interface ScaleTargetRow {
  figure: string;
  target: string;
  /** The projected value as shown. */
  value: string;
  verdict: Verdict;
  /** Why it was missed, from the counts (empty when met). */
  why: string;
}

const judge = (v: number, ok: (v: number) => boolean): Verdict =>
  Number.isFinite(v) ? (ok(v) ? 'met' : 'missed') : '—';

const top = (r: Record<string, number>, n: number) =>
  Object.entries(r)
    .filter(([, v]) => v > 0)
    .sort((a, b) => b[1] - a[1])
    .slice(0, n);

const listed = (r: Record<string, number>, n = 3) =>
  top(r, n)
    .map(([k, v]) => `\`${k}\` ${fmt(v, 0)}`)
    .join(', ');

/** The counts behind a throughput, hot-item or refusal miss of one case. */
export function countsWhy(c: CaseSample, f: CaseFigures): string {
  const parts: string[] = [];
  const h = f.hottest;
  if (h)
    parts.push(
      `hottest partition \`${h.partition}\` at ${fmt(h.awsWcu, 0)} WCU/s and ${fmt(h.awsRcu, 0)} RCU/s on AWS ` +
        `(${fmt(h.share * 100, 0)} % of its limit, ${fmt(h.throttles, 0)} throttles)`,
    );
  const conflicts = c.physics.cancelledTransactions + c.physics.refusedWrites;
  if (conflicts > 0)
    parts.push(
      `${fmt(c.physics.cancelledTransactions, 0)} cancelled transactions and ${fmt(c.physics.refusedWrites, 0)} ` +
        `refused single writes over ${fmt(c.batches, 0)} batches, on ${listed(c.physics.conflictsByItem)}`,
    );
  if (c.physics.throttled > 0) parts.push(`${fmt(c.physics.throttled, 0)} DynamoDB throttles`);
  const calls = listed(c.refusedCalls);
  if (calls) parts.push(`refused calls by caller: ${calls}`);
  const lambda = listed(c.physics.lambdaThrottled);
  if (lambda) parts.push(`Lambda invocations refused past the pool: ${lambda}`);
  const starts = listed(c.physics.startsThrottled ?? {});
  if (starts)
    parts.push(
      `StartExecution tries throttled: ${starts} (${fmt(c.physics.startsFailed ?? 0, 0)} starts failed after the SDK's retries)`,
    );
  if (!c.ok) parts.push(`the case did not finish: ${fmt(c.delivered, 0)} of ${fmt(c.messages, 0)} delivered`);
  return parts.join('; ');
}

/**
 * Why a rate was missed: its counts, and, when no scaled limit was near (no DynamoDB throttle,
 * the hottest partition under half its budget, Lambda refusing fewer than one invocation in ten
 * batches), that this machine bounded it: the projection is then a lower bound.
 */
export function rateWhy(c: CaseSample, f: CaseFigures): string {
  const lambdaRefused = Object.values(c.physics.lambdaThrottled).reduce((a, b) => a + b, 0);
  const limitNear =
    c.physics.throttled > 0 ||
    (f.hottest?.share ?? 0) >= SCALE_TARGETS.hottestShare ||
    lambdaRefused * 10 >= c.batches ||
    (c.physics.startsFailed ?? 0) > 0;
  const counts = countsWhy(c, f);
  if (limitNear || !c.ok) return counts;
  return (
    `no scaled limit bounded it (no DynamoDB throttle, the hottest partition at ` +
    `${fmt((f.hottest?.share ?? 0) * 100, 0)} % of its budget, ${fmt(lambdaRefused, 0)} Lambda refusals over ` +
    `${fmt(c.batches, 0)} batches): this machine's two cores did, so the figure is a lower bound` +
    (counts ? `; ${counts}` : '')
  );
}

const ifMissed = (v: Verdict, why: () => string) => (v === 'missed' ? why() : '');

function drainRows(c: CaseSample, k: number): ScaleTargetRow[] {
  const f = caseFigures(c, k);
  const goal = SCALE_TARGETS.messagesPerSecond[c.batchSize];
  const rows: ScaleTargetRow[] = [];
  const why = () => countsWhy(c, f);
  if (goal !== undefined) {
    const v = judge(f.awsPerSecond, (x) => x >= goal);
    rows.push({
      figure: `${c.label}: messages/s`,
      target: `≥ ${fmt(goal, 0)}`,
      value: fmt(f.awsPerSecond, 0),
      verdict: v,
      why: ifMissed(v, () => rateWhy(c, f)),
    });
  }
  const share = f.hottest?.share ?? Number.NaN;
  const vs = judge(share, (x) => x <= SCALE_TARGETS.hottestShare);
  rows.push({
    figure: `${c.label}: hottest partition's share of its limit`,
    target: `≤ ${fmt(SCALE_TARGETS.hottestShare * 100, 0)} %`,
    value: `${fmt(share * 100, 0)} %`,
    verdict: vs,
    why: ifMissed(vs, why),
  });
  const refused = f.conflictsPer1000 + f.throttlesPer1000;
  const vr = judge(refused, (x) => x < SCALE_TARGETS.refusedPer1000);
  rows.push({
    figure: `${c.label}: cancelled or throttled writes per 1,000 batches`,
    target: `< ${SCALE_TARGETS.refusedPer1000}`,
    value: fmt(refused, 1),
    verdict: vr,
    why: ifMissed(vr, why),
  });
  return rows;
}

function stormRows(c: CaseSample, k: number): ScaleTargetRow[] {
  const s = c.storm;
  if (!s) return [];
  const f = caseFigures(c, k);
  const lost = stormLost(c);
  const bad = s.failedFinalisations + s.lanesFailed + s.recoveries + lost;
  const v: Verdict = c.ok ? (bad === 0 ? 'met' : 'missed') : 'missed';
  // Sustained, as for a drain: the window's tail waits for the last retries to come back.
  const failing = f.awsPerSecond;
  const vRate = judge(failing, (x) => x >= SCALE_TARGETS.stormMessagesPerSecond);
  return [
    {
      figure: `${c.label}: failing deliveries/s (sustained)`,
      target: `≥ ${fmt(SCALE_TARGETS.stormMessagesPerSecond, 0)}`,
      value: fmt(failing, 0),
      verdict: vRate,
      why: ifMissed(vRate, () => rateWhy(c, f)),
    },
    {
      figure: `${c.label}: failed finalisations, lanes failed or cut off, messages lost`,
      target: '0, 0, 0',
      value: `${s.failedFinalisations}, ${s.lanesFailed + s.recoveries}, ${Number.isFinite(lost) ? lost : 'n/a'}`,
      verdict: v,
      why: ifMissed(
        v,
        () =>
          `${s.failedFinalisations} finalise/dead-letter calls threw; ${s.lanesFailed} lanes entered LaneFailed and ` +
          `${s.recoveries} worker invocations failed (RecoverBatch); ${s.deadLettered} of ${c.messages} messages ` +
          `reached the dead-letter queue${c.ok ? '' : ' before the case timed out'}; Host warnings: ` +
          `${listed(c.warnings) || 'none'}; ${countsWhy(c, f)}`,
      ),
    },
  ];
}

function manyRows(c: CaseSample, k: number): ScaleTargetRow[] {
  const m = c.many;
  if (!m) return [];
  const f = caseFigures(c, k);
  const idleRound = m.idleRoundMs.length > 0 ? Math.max(...m.idleRoundMs) : Number.NaN;
  const calls = Math.max(...c.roundCalls, ...m.idleRoundCalls);
  const projected = roundAtTarget(c) / 1000;
  const vRound = judge(projected, (x) => x <= SCALE_TARGETS.roundSeconds);
  const cost = idleUsdPerConsumer(c);
  const vCost = judge(cost, (x) => x <= SCALE_TARGETS.idleUsdPerConsumerMonth);
  const scaled =
    m.consumers === SCALE_TARGETS.consumers
      ? ''
      : ` (${m.consumers} run, ×${fmt(SCALE_TARGETS.consumers / m.consumers, 1)})`;
  return [
    {
      figure: `${c.label}: supervisor round at ${fmt(SCALE_TARGETS.consumers, 0)} consumers${scaled}`,
      target: `≤ ${SCALE_TARGETS.roundSeconds} s`,
      value: `${fmt(projected, 1)} s`,
      verdict: vRound,
      why: ifMissed(
        vRound,
        () =>
          `a round over ${m.consumers} consumers made up to ${fmt(calls, 0)} AWS calls ` +
          `(${fmt(calls / m.consumers, 1)} a consumer), ${SUPERVISE_PARALLEL} consumers visited at once at ` +
          `${AWS_CALL_MS} ms a call; locally the slowest round took ${fmt(maxFinite(idleRound, f.roundMs), 0)} ms`,
      ),
    },
    {
      figure: `${c.label}: idle cost per consumer`,
      target: `≤ $${SCALE_TARGETS.idleUsdPerConsumerMonth}/month`,
      value: `$${fmt(cost, 3)}`,
      verdict: vCost,
      why: ifMissed(
        vCost,
        () =>
          `${m.idleRounds} idle rounds over ${m.consumers} consumers cost $${fmt(m.idleRoundsUsd, 5)} together ` +
          '(the supervisor visits every consumer every minute)',
      ),
    },
  ];
}

/** The largest of the finite values (NaN when none is). */
const maxFinite = (...v: number[]) => {
  const finite = v.filter(Number.isFinite);
  return finite.length > 0 ? Math.max(...finite) : Number.NaN;
};

export function scaleTargetRows(s: ScaleSamples): ScaleTargetRow[] {
  const k = s.config.k;
  return s.cases.flatMap((c) =>
    c.kind === 'drain' ? drainRows(c, k) : c.kind === 'storm' ? stormRows(c, k) : manyRows(c, k),
  );
}
