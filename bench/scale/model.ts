/**
 * The shape of the scale bench's configuration and raw samples (`bench/results/<date>-scale.json`,
 * and `samples.scale` of a full run).
 */

/** One drain of a backlog by one consumer (cases a and c). */
export interface DrainCase {
  /** The consumer's maxConcurrency on AWS; the local lanes are this ÷ k (see `localLanes`). */
  awsConcurrency: number;
  batchSize: number;
  messages: number;
  /** The handler's time per batch, ms (a sleep). */
  handlerMs: number;
  timeoutMs: number;
}

export interface StormCase extends DrainCase {
  maxRetries: number;
}

export interface ManyConsumersCase {
  /** Consumers on the Host (the target is 1,000). */
  consumers: number;
  /** Of those, consumers whose queue gets a trickle while the hot one drains. */
  trickles: number;
  /** Messages a second to each trickled queue, locally. */
  trickleRate: number;
  /** The hot consumer: its backlog, batch and AWS maxConcurrency. */
  hot: { awsConcurrency: number; batchSize: number; messages: number; handlerMs: number };
  /** Supervisor rounds timed while every consumer is idle, and while the load runs. */
  idleRounds: number;
  loadRounds: number;
  timeoutMs: number;
}

export interface ScaleConfig {
  mode: 'full' | 'quick';
  /** k: every AWS limit is divided by it in the stand-ins. */
  k: number;
  /** How long a transaction holds its items on AWS, ms (the local hold is this × k). */
  transactionMs: number;
  drains: DrainCase[];
  many: ManyConsumersCase;
  storm: StormCase;
}

/** What the DynamoDB physics and the Lambda pool refused or consumed during a case's window. */
export interface PhysicsCounts {
  cancelledTransactions: number;
  refusedWrites: number;
  throttled: number;
  /** Conflicts by the item in another transaction (table name dropped, ids folded). */
  conflictsByItem: Record<string, number>;
  /** Units each partition consumed in the window (only those that consumed any). */
  partitions: { partition: string; writeUnits: number; readUnits: number; throttles: number }[];
  /** Lambda invocations refused past the pool, by function. */
  lambdaThrottled: Record<string, number>;
  lambdaPeak: Record<string, number>;
  /** StartExecution tries refused for want of a token, by kind (absent in runs before it was modelled). */
  startsThrottled?: Record<string, number>;
  /** Lane starts refused on every SDK try: the caller saw the error. */
  startsFailed?: number;
}

/** Refused DynamoDB calls the bench's SDK middleware saw, by `context DynamoDB:Operation`. */
export type RefusedCalls = Record<string, number>;

export interface CaseSample {
  kind: 'drain' | 'many' | 'storm';
  label: string;
  ok: boolean;
  /** Lanes the consumer ran locally (its maxConcurrency in the stand-ins). */
  localLanes: number;
  awsConcurrency: number;
  batchSize: number;
  messages: number;
  delivered: number;
  batches: number;
  /** Of the window, the seconds between 10 % and 90 % of the messages finalised. */
  sustainedSeconds: number;
  sustainedMessages: number;
  windowSeconds: number;
  physics: PhysicsCounts;
  refusedCalls: RefusedCalls;
  /** Supervisor rounds timed in this case: ms each, and the AWS calls each made. */
  roundMs: number[];
  roundCalls: number[];
  /** Consumers on the Host (a round visits each). */
  consumers: number;
  /** Host warnings and errors logged in the window, by message. */
  warnings: Record<string, number>;
  many?: ManySample;
  storm?: StormSample;
}

export interface ManySample {
  consumers: number;
  trickles: number;
  trickleSent: number;
  trickleDelivered: number;
  /** Supervisor rounds with every consumer idle: ms each, and their USD over the rounds. */
  idleRoundMs: number[];
  idleRoundCalls: number[];
  idleRoundsUsd: number;
  idleRounds: number;
  setupSeconds: number;
}

export interface StormSample {
  maxRetries: number;
  /** Handler invocations (each one failed). */
  deliveries: number;
  /** Messages in the dead-letter queue at the end. */
  deadLettered: number;
  /** finalizeAsRunner / deadLetterAsRunner calls that threw. */
  failedFinalisations: number;
  /** Lanes that entered LaneFailed, and worker invocations that failed (RecoverBatch entered). */
  lanesFailed: number;
  recoveries: number;
  /** Lanes that ended (LaneDone) before the last message was dead-lettered: idle for a moment, or handed over. */
  lanesEnded?: number;
}

export interface ScaleSamples {
  config: ScaleConfig;
  cases: CaseSample[];
  errors: { scenario: string; error: string }[];
}
