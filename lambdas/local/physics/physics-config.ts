/**
 * TAKOFORM_PHYSICS: the stand-ins enforce AWS's throughput physics, with every limit divided by a
 * scale factor k, so that a small machine meets them at 1/k of the load AWS would take. Unset or
 * empty: the stand-ins never refuse for load (DynamoDB Local runs transactions one after
 * another and has no per-partition throughput; the local Lambda runner has no concurrency pool;
 * the local Step Functions starts any number of executions a second).
 *
 *   TAKOFORM_PHYSICS=50
 *   TAKOFORM_PHYSICS='{"scale":50,"transactionMs":10,"partition":"key","lambda":{"reserved":{"worker":4}}}'
 *
 * Why the in-flight hold scales too: a transaction holds its items for as long as it is in
 * flight, so one item accepts at most about 1/window transactions a second. Dividing the load by
 * k while keeping conflicts as likely as on AWS means multiplying the window by k: the hold is
 * `transactionMs × scale` (what a transaction takes on AWS, times k) unless `holdMs` says
 * otherwise.
 */
import { z } from 'zod';
import { HOST_RESERVED_CONCURRENCY, LAMBDA_UNRESERVED_MINIMUM } from '../../shared/host-concurrency.ts';

export const PHYSICS_ENV = 'TAKOFORM_PHYSICS';

/** AWS's figures, before scaling. */
export const AWS_LIMITS = {
  /** Per partition (table or index), a second: 1,000 WCU or 3,000 RCU, or a linear mix. */
  partitionWriteUnits: 1_000,
  partitionReadUnits: 3_000,
  /** Lambda concurrent executions per account and Region (the default quota). */
  accountConcurrency: 1_000,
  /** Lambda keeps this much of the account's pool unreserved. */
  unreservedMinimum: LAMBDA_UNRESERVED_MINIMUM,
  /**
   * Step Functions' StartExecution token bucket per account and Region: Standard workflows in
   * US East (N. Virginia), US West (Oregon) and Europe (Ireland) — the largest of the quota
   * pages' figures (800 and 150 elsewhere) — and Express workflows in every Region.
   */
  startExecution: {
    standard: { bucket: 1_300, perSecond: 300 },
    express: { bucket: 6_000, perSecond: 6_000 },
  },
} as const;

/** The functions a reservation may name: the local invocations' labels and the other Host functions. */
const RESERVABLE = ['worker', 'step', 'batch-host', 'api', 'executor', 'supervisor'] as const;
export type ReservableFunction = (typeof RESERVABLE)[number];

/** The Host's default reservations under the local labels (before scaling). */
export const HOST_DEFAULT_RESERVED: Partial<Record<ReservableFunction, number>> = {
  api: HOST_RESERVED_CONCURRENCY.api,
  step: HOST_RESERVED_CONCURRENCY.step,
  'batch-host': HOST_RESERVED_CONCURRENCY.batchHost,
  executor: HOST_RESERVED_CONCURRENCY.executor,
  supervisor: HOST_RESERVED_CONCURRENCY.supervisor,
};
/** Functions the local Host never invokes: scaled to the nearest count, 0 included. */
const NOT_INVOKED: ReadonlySet<ReservableFunction> = new Set(['api', 'executor', 'supervisor']);

const positive = (what: string) =>
  z.number({ error: `must be a positive number (${what})` }).positive(`must be a positive number (${what})`);
const nonNegativeInt = z
  .number({ error: 'must be a non-negative integer' })
  .int('must be a non-negative integer')
  .min(0, 'must be a non-negative integer');

const physicsSchema = z.strictObject({
  /** k: every limit is divided by it. */
  scale: positive('k ≥ 1 scales limits down').min(1, 'must be at least 1'),
  /** How long a transaction is in flight on AWS (ms); the local hold is this times `scale`. */
  transactionMs: positive('ms').optional(),
  /** The least time a transaction holds its items locally (ms), whatever `transactionMs` says. */
  holdMs: nonNegativeInt.optional(),
  /**
   * What shares a throughput budget: `key` (every item of one partition key value, as on a
   * partition before DynamoDB splits it for heat) or `item` (each item apart: the floor, since an
   * item never splits).
   */
  partition: z.enum(['key', 'item']).optional(),
  lambda: z
    .strictObject({
      /** Concurrent executions of the account (before scaling; default 1,000). */
      accountConcurrency: positive('executions').optional(),
      /**
       * Reserved concurrency per function (before scaling). Absent: the Host's defaults, as the
       * CDK deploys them (`HOST_RESERVED_CONCURRENCY`); `{}`: none (a Host deployed with
       * `reserveConcurrency: false`). `api`, `executor` and `supervisor` are not invoked locally,
       * but their reservations leave the others less of the pool.
       */
      reserved: z.partialRecord(z.enum(RESERVABLE), nonNegativeInt).optional(),
    })
    .optional(),
});

export type PhysicsInput = z.infer<typeof physicsSchema>;

export interface Physics {
  scale: number;
  /** Per partition and second, after scaling. */
  writeUnitsPerSecond: number;
  readUnitsPerSecond: number;
  holdMs: number;
  partition: 'key' | 'item';
  /** StartExecution's token bucket by kind of state machine, after scaling. */
  startExecution: Record<'standard' | 'express', { bucket: number; perSecond: number }>;
  lambda: {
    accountConcurrency: number;
    reserved: Partial<Record<ReservableFunction, number>>;
  };
}

const DEFAULT_TRANSACTION_MS = 10;

export function physicsOf(input: PhysicsInput): Physics {
  const k = input.scale;
  const scaleDown = (n: number) => Math.max(1, Math.floor(n / k));
  const reserved: Physics['lambda']['reserved'] = {};
  for (const [name, n] of Object.entries(input.lambda?.reserved ?? HOST_DEFAULT_RESERVED)) {
    const fn = name as ReservableFunction;
    // A function invoked locally keeps at least one (a reservation of 0 would stop it); the others
    // only take their share of the pool, which rounds to 0 at a large k.
    reserved[fn] = n === 0 ? 0 : NOT_INVOKED.has(fn) ? Math.round(n / k) : scaleDown(n);
  }
  return {
    scale: k,
    writeUnitsPerSecond: AWS_LIMITS.partitionWriteUnits / k,
    readUnitsPerSecond: AWS_LIMITS.partitionReadUnits / k,
    holdMs: input.holdMs ?? Math.round((input.transactionMs ?? DEFAULT_TRANSACTION_MS) * k),
    partition: input.partition ?? 'key',
    startExecution: {
      standard: {
        bucket: scaleDown(AWS_LIMITS.startExecution.standard.bucket),
        perSecond: AWS_LIMITS.startExecution.standard.perSecond / k,
      },
      express: {
        bucket: scaleDown(AWS_LIMITS.startExecution.express.bucket),
        perSecond: AWS_LIMITS.startExecution.express.perSecond / k,
      },
    },
    lambda: {
      accountConcurrency: scaleDown(input.lambda?.accountConcurrency ?? AWS_LIMITS.accountConcurrency),
      reserved,
    },
  };
}

/** Parses a TAKOFORM_PHYSICS value (k, or JSON); throws one Error naming every problem. */
export function parsePhysics(raw: string): Physics {
  const text = raw.trim();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new Error(`${PHYSICS_ENV} is neither a number nor JSON: ${(err as Error).message}`);
  }
  const parsed = physicsSchema.safeParse(typeof json === 'number' ? { scale: json } : json);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join('.') || 'scale'}: ${i.message}`);
    throw new Error(`invalid ${PHYSICS_ENV}: ${problems.join('; ')}`);
  }
  return physicsOf(parsed.data);
}

/** The physics in `env`, or undefined when the variable is unset or empty (no limits). */
export function physicsFromEnv(env: NodeJS.ProcessEnv = process.env): Physics | undefined {
  const raw = env[PHYSICS_ENV];
  return raw === undefined || raw.trim() === '' ? undefined : parsePhysics(raw);
}

/**
 * One model per process while TAKOFORM_PHYSICS stays the same (AWS's quotas are per account, and
 * every function a process stands for draws on one): made again when the setting changes,
 * undefined without it (no limit).
 */
export function perProcessModel<T>(
  make: (physics: Physics) => T,
): (env?: NodeJS.ProcessEnv) => T | undefined {
  let kept: { raw: string | undefined; model: T | undefined } | undefined;
  return (env = process.env) => {
    const raw = env.TAKOFORM_PHYSICS;
    if (kept === undefined || kept.raw !== raw) {
      const physics = physicsFromEnv(env);
      kept = { raw, model: physics ? make(physics) : undefined };
    }
    return kept.model;
  };
}
