/**
 * Why a traffic-shape figure missed its target, from the counts behind it: its parts, most
 * expensive first, each with the count it comes from, and for the trickles the share of the lane's
 * waiting. Only the run's numbers are quoted.
 */
import { LEFT_IDLE_WAIT_SECONDS } from '../../lambdas/delivery/lane-receive.ts';
import { fmt } from '../format.ts';
import type { CostBreakdown } from '../pricing.ts';
import { PRICES } from '../pricing.ts';
import { idleSecondUsd, judgeShape, receivesBound } from './compose.ts';
import type { ShapeFigure, ShapesSummary } from './model.ts';
import { targetText } from './summarise.ts';

type Part = Exclude<keyof CostBreakdown, 'total' | 'cloudwatch'>;

const PART_NAMES: Record<Part, string> = {
  lambdaDuration: 'Lambda duration',
  stepFunctions: 'Step Functions',
  dynamoWrites: 'DynamoDB writes',
  dynamoReads: 'DynamoDB reads',
  sqs: 'SQS',
  lambdaRequests: 'Lambda requests',
  logs: 'CloudWatch Logs',
};

/** Why a worker invocation runs as long as it does, by how the figure was made. */
function workerWhy(f: ShapeFigure, s: ShapesSummary): string {
  const window = s.consumer.maxBatchTimeoutSeconds;
  if (f.how === 'isolated')
    return `the lane the message wakes gathers it for the batch window (${window} s), which a batch that is not full waits out, then polls once more (${LEFT_IDLE_WAIT_SECONDS} s) and ends`;
  if (f.how === 'kept alive')
    return `the lane's invocation long-polls between arrivals (${fmt(1 / f.rate, 0)} s a message) and gathers each for the batch window (${window} s)`;
  return (
    `${fmt(f.meanLanes ?? Number.NaN, 1)} lanes' invocations ran at once on average, each billed while it long-polls` +
    ` for a first message and gathers for the batch window (${window} s), not only while the handler runs`
  );
}

function partCounts(part: Part, f: ShapeFigure, s: ShapesSummary): string {
  const c = f.perMessage;
  switch (part) {
    case 'lambdaDuration':
      return (
        `worker invocations ${fmt(c.gbSeconds.worker ?? 0, 3)} GB-s a message: ${workerWhy(f, s)};` +
        ` the batch host ${fmt(c.gbSeconds.batchHost ?? 0, 3)}, the dispatcher step ${fmt(c.gbSeconds.step ?? 0, 3)}`
      );
    case 'stepFunctions':
      return (
        `${fmt(c.expressSeconds, 2)} s of Express execution and ${fmt(c.transitions, 2)} state transitions a message,` +
        ` ${fmt(c.laneStarts * 1000, 1)} lane starts per 1,000 messages`
      );
    case 'dynamoWrites':
      return (
        `${fmt(c.wruProducer, 2)} WRU a message from the sends (each counts a wake) and ${fmt(c.wruDelivery, 2)}` +
        ` from the batches (${fmt(c.wruDelivery * f.messagesPerBatch, 1)} per batch of ${fmt(f.messagesPerBatch, 1)})`
      );
    case 'dynamoReads':
      return `${fmt(c.rru, 2)} RRU a message`;
    case 'sqs':
      return (
        `${fmt(c.sqsRequests, 2)} requests a message, ${fmt(c.receives, 2)} of them receives` +
        ` (${fmt(1 / c.receives, 1)} messages a receive: each lane gathering its batch receives what arrived since its last receive);` +
        ` the event source mapping's ${fmt(f.esm.sqsRequestsPerMessage, 2)} at its least`
      );
    case 'lambdaRequests':
      return `${fmt(c.invocations, 2)} invocations a message; the event source mapping's ${fmt(1 / f.esm.messagesPerBatch, 2)}`;
    case 'logs':
      return `${fmt(c.logBytes, 0)} bytes a message`;
  }
}

/** A figure's parts, most expensive first: `Lambda duration $6.80 (…)`. */
export function partsByCost(f: ShapeFigure, s: ShapesSummary, count = 4): string[] {
  return (Object.keys(PART_NAMES) as Part[])
    .filter((p) => f.perMillion[p] > 0)
    .sort((a, b) => f.perMillion[b] - f.perMillion[a])
    .slice(0, count)
    .map((p) => `${PART_NAMES[p]} $${fmt(f.perMillion[p], 2)} (${partCounts(p, f, s)})`);
}

/** The part most of a figure is, and its share: `Lambda duration 81 %`. */
export function dominantPart(f: ShapeFigure): string {
  const parts = Object.keys(PART_NAMES) as Part[];
  const top = parts.reduce((a, b) => (f.perMillion[b] > f.perMillion[a] ? b : a));
  return `${PART_NAMES[top]} ${fmt((100 * f.perMillion[top]) / f.perMillion.total, 0)} %`;
}

/** For a trickle: what the lane's wait for the next message (or for nothing) costs of each message. */
function idleShare(f: ShapeFigure, s: ShapesSummary): string {
  if (f.how === 'stream') return '';
  const second = idleSecondUsd(f.perMessage.expressSeconds > 0);
  const window = s.consumer.maxBatchTimeoutSeconds;
  const waited =
    f.how === 'isolated' ? window + LEFT_IDLE_WAIT_SECONDS : 1 / f.rate - s.consumer.maxBatchTimeoutSeconds;
  const usd = waited * (second.lambdaDuration + second.stepFunctions) * 1e6;
  const what =
    f.how === 'isolated'
      ? `the batch window, ${window} s, and the last poll, ${LEFT_IDLE_WAIT_SECONDS} s`
      : 'long-polling between arrivals';
  return (
    ` The lane's ${fmt(waited, 0)} s of waiting a message (${what})` +
    ` is $${fmt(usd, 2)} of it (worker and Express execution by the second); without it the message would cost $${fmt(f.perMillion.total - usd, 2)} per million.`
  );
}

/** Where lanes polling side by side counted more receives than one a message and one a batch. */
function standInReceives(f: ShapeFigure): string {
  const c = f.perMessage;
  const bound = receivesBound(c.receives, f.messagesPerBatch);
  const extra = (c.receives - bound) * PRICES.sqsPerMillionRequests;
  if (f.how !== 'stream' || extra < 0.05 * f.perMillion.total) return '';
  const without = f.perMillion.total - extra;
  const verdict =
    judgeShape(without, f.esm.total, f.target) === 'met'
      ? 'which would meet the target'
      : without > f.target.usd
        ? `still over $${fmt(f.target.usd, 2)}`
        : `still over ${f.target.esmRatio}× the event source mapping`;
  return (
    ' Of the receives, more than one a message and one a batch: several lanes polled side by side, each polling' +
    ' again after a batch, and the empty answers count.' +
    ` At ${fmt(bound, 2)} receives a message (one a message and one a batch) SQS would be $${fmt(f.perMillion.sqs - extra, 2)}` +
    ` and the figure $${fmt(without, 3)} per million, ${verdict}.`
  );
}

export function shapeMiss(f: ShapeFigure, s: ShapesSummary): string {
  const bound =
    f.target.esmRatio !== undefined
      ? ` (${f.target.esmRatio} × $${fmt(f.esm.total, 3)} = $${fmt(f.target.esmRatio * f.esm.total, 3)})`
      : '';
  const composed = f.how === 'stream' ? '' : ` (composed: ${f.how})`;
  return (
    `**${f.label}${composed}: $${fmt(f.perMillion.total, 3)} per million against ${targetText(f.target)}${bound} — missed.**` +
    ` ${dominantPart(f)} of it. By part: ${partsByCost(f, s).join('; ')}.` +
    idleShare(f, s) +
    standInReceives(f)
  );
}

/** One paragraph per missed figure, in rate order. */
export const shapeMisses = (s: ShapesSummary): string[] =>
  s.figures.filter((f) => f.verdict === 'missed').map((f) => shapeMiss(f, s));
