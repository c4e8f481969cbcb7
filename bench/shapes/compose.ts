/**
 * The arithmetic of the traffic-shape bench, with no measuring in it: a tally's counts per
 * message, the figure of a sparse arrival rate composed from the measured episodes, Lambda with
 * an SQS event source mapping at the same rate from the same price table, and the targets'
 * judgement.
 */
import { MESSAGE_LIMITS } from '../../lambdas/delivery/limits.ts';
import { isDelivery } from '../per-batch.ts';
import { type CostBreakdown, logBytesOf, memoryGbOf, PRICES, scale, transitionsOf, usd } from '../pricing.ts';
import { judge, TARGETS } from '../summary/targets.ts';
import type { Verdict } from '../summary-model.ts';
import { hostFunctionOf, LAMBDA_PLATFORM_LOG_BYTES, sumSdk, type Tally } from '../support/meter.ts';
import type { EsmCost, ShapeCounts } from './model.ts';

const BYTES_PER_GB = 1024 ** 3;

/** What the Host spent in a tally, as the counts a figure's explanation quotes. */
export function countsOf(t: Tally): ShapeCounts {
  const sdk = sumSdk(t, isDelivery);
  const producer = sumSdk(t, (context) => context === 'producer');
  const gbSeconds: Record<string, number> = {};
  let invocations = 0;
  for (const [role, l] of Object.entries(t.lambda)) {
    const fn = hostFunctionOf(role);
    gbSeconds[fn] = (gbSeconds[fn] ?? 0) + (l.billedMs / 1000) * memoryGbOf(role);
    invocations += l.invocations;
  }
  const wruProducer = producer.wru + producer.refusedWrites;
  return {
    gbSeconds,
    invocations,
    expressSeconds: (t.express?.billedMs ?? 0) / 1000,
    laneStarts: t.executions,
    transitions: transitionsOf(t),
    sqsRequests: sdk.sqsRequests,
    receives: sdk.byOp['SQS:ReceiveMessage']?.calls ?? 0,
    wruProducer,
    wruDelivery: sdk.wru + sdk.refusedWrites - wruProducer,
    rru: sdk.rru,
    logBytes: logBytesOf(t, isDelivery),
  };
}

/** `a + f × b`, count by count (f = -1 subtracts, b = a with f = 0 copies). */
function combine(a: ShapeCounts, b: ShapeCounts, f: number, by = 1): ShapeCounts {
  const out = {} as Record<string, unknown>;
  for (const [k, v] of Object.entries(a)) {
    const w = (b as unknown as Record<string, unknown>)[k];
    if (typeof v === 'number') out[k] = (v + f * (w as number)) * by;
    else {
      const keys = new Set([...Object.keys(v), ...Object.keys(w as object)]);
      out[k] = Object.fromEntries(
        [...keys].map((g) => [
          g,
          (((v as Record<string, number>)[g] ?? 0) + f * ((w as Record<string, number>)[g] ?? 0)) * by,
        ]),
      );
    }
  }
  return out as unknown as ShapeCounts;
}

export const scaleCounts = (c: ShapeCounts, by: number) => combine(c, c, 0, by);

const minus = (a: CostBreakdown, b: CostBreakdown): CostBreakdown =>
  Object.fromEntries(
    Object.entries(a).map(([k, v]) => [k, v - b[k as keyof CostBreakdown]]),
  ) as unknown as CostBreakdown;

/** A measured episode, whole: its messages, its length and what it cost. */
export interface Episode {
  messages: number;
  /** Send to send (the kept-alive episode; 0 for one message). */
  gapSeconds: number;
  /** From the first send until every lane had ended. */
  seconds: number;
  usd: CostBreakdown;
  counts: ShapeCounts;
  /** Its lanes ran on the Express dispatcher (billed per second of execution). */
  express: boolean;
}

export function episodeOf(t: Tally, e: { messages: number; gapSeconds: number; seconds: number }): Episode {
  return {
    messages: e.messages,
    gapSeconds: e.gapSeconds,
    seconds: e.seconds,
    usd: usd(t, isDelivery),
    counts: countsOf(t),
    express: (t.express?.executions ?? 0) > 0,
  };
}

/**
 * USD of one more second of a lane in its long poll: its worker invocation at the worker's memory
 * and, on Express, its execution.
 */
export function idleSecondUsd(express: boolean): { lambdaDuration: number; stepFunctions: number } {
  return {
    lambdaDuration: (PRICES.lambdaMemoryMb.worker / 1024) * PRICES.lambdaArm64PerGbSecond,
    stepFunctions: express ? PRICES.sfnExpressMemoryGb * PRICES.sfnExpressPerGbSecond : 0,
  };
}

export interface Composed {
  how: 'isolated' | 'kept alive';
  /** Per message. */
  usd: CostBreakdown;
  counts: ShapeCounts;
}

/**
 * One message of a trickle, one every `gapSeconds`, from the two episodes:
 *
 * - isolated when the lane a message wakes has ended before the next one comes (the gap is at
 *   least the isolated episode, send to lane end): each message is that whole episode — a lane
 *   start, a batch of one, its last poll and the lane's end;
 * - kept alive otherwise: what each further message of the kept-alive episode added to the
 *   isolated one ((episode − isolated) ÷ (messages − 1)): its send, its batch, and the gap's
 *   seconds of the lane's long poll, which are lengthened or shortened to `gapSeconds` at the
 *   price of a second of it.
 */
export function composeTrickle(gapSeconds: number, isolated: Episode, keptAlive: Episode): Composed {
  if (gapSeconds >= isolated.seconds) {
    const per = 1 / Math.max(1, isolated.messages);
    return { how: 'isolated', usd: scale(isolated.usd, per), counts: scaleCounts(isolated.counts, per) };
  }
  const further = Math.max(1, keptAlive.messages - isolated.messages);
  const cost = scale(minus(keptAlive.usd, isolated.usd), 1 / further);
  const counts = combine(keptAlive.counts, isolated.counts, -1, 1 / further);
  const extra = gapSeconds - keptAlive.gapSeconds;
  const second = idleSecondUsd(keptAlive.express);
  cost.lambdaDuration += extra * second.lambdaDuration;
  cost.stepFunctions += extra * second.stepFunctions;
  cost.total += extra * (second.lambdaDuration + second.stepFunctions);
  counts.gbSeconds.worker = (counts.gbSeconds.worker ?? 0) + (extra * PRICES.lambdaMemoryMb.worker) / 1024;
  if (keptAlive.express) counts.expressSeconds += extra;
  return { how: 'kept alive', usd: cost, counts };
}

/**
 * The receives a message would cost where a message ends one waiting long poll and leaves the
 * others waiting, as SQS documents long polling: at most one a message and one a batch (the
 * poll that ends a batch window). Receives beyond it are lanes polling side by side (or, in runs
 * before the SQS stand-in woke one poll per message, its empty answers to the others).
 */
export const receivesBound = (receivesPerMessage: number, messagesPerBatch: number) =>
  Math.min(receivesPerMessage, 1 + 1 / Math.max(1, messagesPerBatch));

/**
 * Messages per batch at `rate` (a second) when arrivals are evenly spaced: the first message opens
 * the batch window and those that arrive inside it join, up to the batch size.
 */
export const messagesPerBatch = (rate: number, maxBatchSize: number, windowSeconds: number) =>
  Math.min(maxBatchSize, Math.floor(rate * windowSeconds + 1e-9) + 1);

/** What the event source mapping's batches are assumed to be, and the handler they run. */
export interface EsmAssumption {
  maxBatchSize: number;
  /** Its MaximumBatchingWindowInSeconds. */
  windowSeconds: number;
  /** The handler's own work per batch, ms (billed at Lambda's 1 ms at least). */
  handlerMs: number;
}

/**
 * Lambda with an SQS event source mapping at `rate`, USD per million messages: one SendMessage
 * per message; per batch ⌈n/10⌉ ReceiveMessage and ⌈n/10⌉ DeleteMessageBatch (at most 10 a
 * request — receives that come back with fewer would add requests, so this is the mapping's
 * least), one Lambda request, the handler's time at the worker's memory and Lambda's own log
 * lines. Nothing for the pollers or their empty receives: the mapping does not bill them.
 */
export function lambdaEsm(rate: number, a: EsmAssumption): EsmCost {
  const n = messagesPerBatch(rate, a.maxBatchSize, a.windowSeconds);
  const perBatch = Math.ceil(n / MESSAGE_LIMITS.sqsMaxReceive);
  const sqsRequestsPerMessage = 1 + (2 * perBatch) / n;
  const gbSeconds = (Math.max(1, Math.ceil(a.handlerMs)) / 1000) * (PRICES.lambdaMemoryMb.worker / 1024);
  const parts = {
    sqs: sqsRequestsPerMessage * PRICES.sqsPerMillionRequests,
    lambdaRequests: PRICES.lambdaPerMillionRequests / n,
    lambdaDuration: (gbSeconds * PRICES.lambdaArm64PerGbSecond * 1e6) / n,
    logs: ((LAMBDA_PLATFORM_LOG_BYTES / BYTES_PER_GB) * PRICES.cloudwatchLogsPerGbIngested * 1e6) / n,
  };
  return {
    messagesPerBatch: n,
    sqsRequestsPerMessage,
    ...parts,
    total: parts.sqs + parts.lambdaRequests + parts.lambdaDuration + parts.logs,
  };
}

/** The shape targets: streams of a message a second or more, and the trickles below. */
export function shapeTarget(rate: number): { usd: number; esmRatio?: number } {
  const t = TARGETS.shapes;
  return rate >= 1 ? { usd: t.streamUsdPerMillion, esmRatio: t.esmRatio } : { usd: t.trickleUsdPerMillion };
}

/** Met only when every bound of the target holds; an unmeasured figure is not judged. */
export function judgeShape(
  usdPerMillion: number,
  esmTotal: number,
  target: { usd: number; esmRatio?: number },
): Verdict {
  return judge(
    usdPerMillion,
    (v) => v <= target.usd && (target.esmRatio === undefined || v <= target.esmRatio * esmTotal),
  );
}
