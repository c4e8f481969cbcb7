/**
 * The shape of the traffic-shape bench's configuration, raw samples and summary
 * (`bench/results/<date>-shapes.json`, and `samples.shapes` / `summary.shapes` of a full run).
 */
import type { CostBreakdown } from '../pricing.ts';
import type { SteadyHostSample, SteadyTiming, StreamTail } from '../scenarios/steady.ts';
import type { EpisodeSample } from '../scenarios/trickle.ts';
import type { Verdict } from '../summary-model.ts';

export interface ShapesConfig {
  mode: 'full' | 'quick';
  /** The one consumer every shape is measured with. */
  consumer: { maxBatchSize: number; maxBatchTimeoutSeconds: number; maxConcurrency: number };
  /** The lanes' idle wait: the Host's on AWS. */
  idleWaitSeconds: number;
  /** Arrival rates run as streams, messages per second. */
  streamRates: number[];
  timing: SteadyTiming;
  /** How long the bench waits at most for every lane to end, after a stream and after an episode. */
  tailTimeoutMs: number;
  /** Arrivals too sparse to run as a stream: one message every `gapSeconds`, composed from the episodes. */
  composedGaps: number[];
  /** The kept-alive episode: `messages` sent `gapSeconds` apart. */
  keptAlive: { messages: number; gapSeconds: number };
}

export interface StreamSample {
  rate: number;
  host: SteadyHostSample & { tail?: StreamTail };
}

export interface ShapesSamples {
  config: ShapesConfig;
  streams: StreamSample[];
  /** One message to a consumer with no lane, until its lane ended. */
  isolated?: EpisodeSample;
  /** `keptAlive.messages` sent `keptAlive.gapSeconds` apart, until the lane ended. */
  keptAlive?: EpisodeSample;
  /** One message sent straight to SQS just after a supervisor round, until its lane ended. */
  straight?: EpisodeSample;
  errors: { scenario: string; error: string }[];
}

/** What a figure's USD come from, per message: the counts its explanation quotes. */
export interface ShapeCounts {
  /** Billed GB-seconds of each Host function (worker, batchHost, step). */
  gbSeconds: Record<string, number>;
  invocations: number;
  /** Express executions' billed seconds. */
  expressSeconds: number;
  /** Lane executions started. */
  laneStarts: number;
  transitions: number;
  sqsRequests: number;
  /** Of those, ReceiveMessage. */
  receives: number;
  /** Write units of the producer's sends (the wake count) and of the rest of delivery. */
  wruProducer: number;
  wruDelivery: number;
  rru: number;
  logBytes: number;
}

/** Lambda with an SQS event source mapping at the same rate, from the same price table. */
export interface EsmCost {
  messagesPerBatch: number;
  sqsRequestsPerMessage: number;
  /** USD per million messages by part. */
  sqs: number;
  lambdaRequests: number;
  lambdaDuration: number;
  logs: number;
  total: number;
}

export type ShapeHow = 'stream' | 'isolated' | 'kept alive';

export interface ShapeFigure {
  /** `1 a minute`, `1 every 10 s`, `1/s`, … */
  label: string;
  /** Arrivals per second the figure is for. */
  rate: number;
  how: ShapeHow;
  /** USD per million messages by part. */
  perMillion: CostBreakdown;
  /** Counts per message. */
  perMessage: ShapeCounts;
  messagesPerBatch: number;
  /** Streams: arrivals and handler starts per second inside the window. */
  sentPerSecond?: number;
  handledPerSecond?: number;
  /** Streams: the most the producer fell behind its schedule, ms. */
  producerLagMs?: number;
  /** Streams: worker invocations running at once, on average over the window. */
  meanLanes?: number;
  /** Streams: what the stream's end cost once, after the window, until every lane had ended. */
  tail?: { usd: number; lanes: number; seconds: number; ended: boolean };
  esm: EsmCost;
  cloudflare: number;
  target: { usd: number; esmRatio?: number };
  verdict: Verdict;
}

export interface ShapesSummary {
  mode: ShapesConfig['mode'];
  consumer: ShapesConfig['consumer'];
  idleWaitSeconds: number;
  windowSeconds: number;
  /** The handler's own work per batch, ms (median), which the event source mapping's function is billed for. */
  handlerMs: number;
  figures: ShapeFigure[];
  /** The episodes the sparse rates are composed of, whole (not per message). */
  episodes?: {
    isolated: { seconds: number; usd: number; counts: ShapeCounts };
    keptAlive: { messages: number; gapSeconds: number; seconds: number; usd: number; counts: ShapeCounts };
  };
  /**
   * A message sent straight to SQS just after a supervisor round: how long until its batch was
   * finalised (s), with the round's period (s).
   */
  pickup?: { seconds: number; supervisorSeconds: number };
  errors: string[];
}
