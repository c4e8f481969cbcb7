/**
 * From a scale case's counts to AWS: each figure a limit divided by k bounded is multiplied by k
 * back (messages/s, an item's units a second); a ratio of counts (conflicts per 1,000 batches, a
 * share of the partition limit) is the same at any k, since the stand-ins hold a transaction k
 * times as long at 1/k of the load; a supervisor round is a chain of calls whose latency no limit
 * divides: its AWS time is the calls it made at an AWS call's latency, `SUPERVISE_PARALLEL`
 * consumers visited at once. Pure: the unit test reads these.
 */

import { SHARDS_PER_GROUP } from '../../lambdas/adapters/aws/slot-groups.ts';
import { SUPERVISE_PARALLEL } from '../../lambdas/delivery/supervision.ts';
import { AWS_LIMITS } from '../../lambdas/local/physics/physics-config.ts';
import { median } from '../support/stats.ts';
import type { CaseSample, PhysicsCounts } from './model.ts';

/**
 * Slot items to a partition key at scale k: each local lane stands for k lanes on AWS, so a group
 * of 25 AWS lanes (`slot-groups.ts`) is 25 / k local ones. Left at 25, the 25 local lanes of a
 * consumer at maxConcurrency 250 would share one partition key that its 250 AWS lanes spread over
 * ten, and the hottest partition would read ten times hotter than on AWS.
 */
export const scaledGroup = (k: number) => Math.max(1, Math.round(SHARDS_PER_GROUP / k));

/** What an in-Region AWS call (DynamoDB a few ms, SQS ten or more) is taken to take, ms. */
export const AWS_CALL_MS = 10;
export const MINUTES_PER_MONTH = 30 * 24 * 60;

export const SCALE_TARGETS = {
  /** Messages/s of one consumer at maxConcurrency 250, by batch size. */
  messagesPerSecond: { 10: 5_000, 100: 25_000 } as Record<number, number>,
  /** The hottest partition's share of its limit. */
  hottestShare: 0.5,
  /** Cancelled or throttled writes per 1,000 batches: fewer than this. */
  refusedPer1000: 1,
  stormMessagesPerSecond: 5_000,
  consumers: 1_000,
  roundSeconds: 20,
  idleUsdPerConsumerMonth: 0.2,
} as const;

export interface Hottest {
  partition: string;
  /** Units a second in the stand-ins, and on AWS (× k). */
  localWcu: number;
  localRcu: number;
  awsWcu: number;
  awsRcu: number;
  /** Of the partition's limit, as DynamoDB mixes them: WCU/1,000 + RCU/3,000 (same at any k). */
  share: number;
  throttles: number;
}

export interface CaseFigures {
  localPerSecond: number;
  awsPerSecond: number;
  conflictsPer1000: number;
  throttlesPer1000: number;
  lambdaThrottlesPer1000: number;
  hottest: Hottest | undefined;
  roundMs: number;
  awsRoundMs: number;
}

const per1000 = (n: number, batches: number) => (batches > 0 ? (n / batches) * 1000 : Number.NaN);
const sum = (r: Record<string, number>) => Object.values(r).reduce((a, n) => a + n, 0);

/** The partition that used most of its limit over `seconds`. */
export function hottestPartition(p: PhysicsCounts, seconds: number, k: number): Hottest | undefined {
  let best: Hottest | undefined;
  for (const x of p.partitions) {
    const localWcu = x.writeUnits / seconds;
    const localRcu = x.readUnits / seconds;
    const share =
      (localWcu * k) / AWS_LIMITS.partitionWriteUnits + (localRcu * k) / AWS_LIMITS.partitionReadUnits;
    if (!best || share > best.share)
      best = {
        partition: x.partition,
        localWcu,
        localRcu,
        awsWcu: localWcu * k,
        awsRcu: localRcu * k,
        share,
        throttles: x.throttles,
      };
  }
  return best;
}

/**
 * A round's time on AWS from the calls it made: each visit is a chain of calls, and the round
 * visits `SUPERVISE_PARALLEL` consumers at once (fewer when there are fewer).
 */
export function awsRoundMs(calls: number, consumers: number): number {
  if (!Number.isFinite(calls) || consumers <= 0) return Number.NaN;
  return (calls * AWS_CALL_MS) / Math.min(SUPERVISE_PARALLEL, consumers);
}

export function caseFigures(c: CaseSample, k: number): CaseFigures {
  const localPerSecond = c.sustainedSeconds > 0 ? c.sustainedMessages / c.sustainedSeconds : Number.NaN;
  const roundMs = c.roundMs.length > 0 ? median(c.roundMs) : Number.NaN;
  const roundCalls = c.roundCalls.length > 0 ? median(c.roundCalls) : Number.NaN;
  return {
    localPerSecond,
    awsPerSecond: localPerSecond * k,
    conflictsPer1000: per1000(c.physics.cancelledTransactions + c.physics.refusedWrites, c.batches),
    throttlesPer1000: per1000(c.physics.throttled, c.batches),
    lambdaThrottlesPer1000: per1000(sum(c.physics.lambdaThrottled), c.batches),
    hottest: hottestPartition(c.physics, c.windowSeconds, k),
    roundMs,
    awsRoundMs: awsRoundMs(roundCalls, c.consumers),
  };
}

/** The idle Host's cost per consumer a month: its timed idle rounds, one a minute. */
export function idleUsdPerConsumer(c: CaseSample): number {
  const m = c.many;
  if (!m || m.idleRounds === 0 || m.consumers === 0) return Number.NaN;
  return ((m.idleRoundsUsd / m.idleRounds) * MINUTES_PER_MONTH) / m.consumers;
}

/**
 * An AWS round over 1,000 consumers from the most calls a round over fewer made: a round visits
 * each consumer, so its calls grow linearly.
 */
export function roundAtTarget(c: CaseSample): number {
  const n = c.consumers;
  const calls = [...c.roundCalls, ...(c.many?.idleRoundCalls ?? [])];
  if (n <= 0 || calls.length === 0) return Number.NaN;
  return awsRoundMs(Math.max(...calls) * (SCALE_TARGETS.consumers / n), SCALE_TARGETS.consumers);
}

/** Lost messages of a storm: neither dead-lettered nor still counted anywhere. */
export function stormLost(c: CaseSample): number {
  return c.storm ? Math.max(0, c.messages - c.storm.deadLettered) : Number.NaN;
}

/** The lanes a consumer of `awsConcurrency` runs in the stand-ins: the Lambda pool is 1/k of AWS's. */
export const localLanes = (awsConcurrency: number, k: number) => Math.max(1, Math.round(awsConcurrency / k));

/**
 * The sustained part of a drain: from the finalisation that passed 10 % of `total` messages to
 * the one that passed 90 %, so that neither the lanes' start nor the last half-empty batches count.
 * `events` are (time ms, messages) in the order they happened.
 */
export function sustainedWindow(
  events: readonly (readonly [number, number])[],
  total: number,
): { messages: number; seconds: number } {
  let seen = 0;
  let from: { t: number; n: number } | undefined;
  let to: { t: number; n: number } | undefined;
  for (const [t, n] of events) {
    seen += n;
    if (!from && seen >= total * 0.1) from = { t, n: seen };
    if (!to && seen >= total * 0.9) to = { t, n: seen };
  }
  if (!from || !to || to.t <= from.t) return { messages: 0, seconds: 0 };
  return { messages: to.n - from.n, seconds: (to.t - from.t) / 1000 };
}
