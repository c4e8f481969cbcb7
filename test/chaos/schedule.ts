/**
 * Chaos schedules: everything a run does is decided here, from the seed alone — consumer
 * settings, how many messages and in which waves, what each handler does on each attempt, which
 * faults happen in which order, which crash point is armed and at which occurrence (`point@N`),
 * and which maxConcurrency updates are made while handlers run.
 * Running the same seed again replays the same schedule; only timing (which batch a wall-clock
 * kill or an occurrence-counted crash point happens to hit) can differ.
 */
import { createRng, type Rng } from './prng.ts';

/** What a handler does with a batch whose first message has this mode (see chaos-worker.ts). */
export type Mode =
  /** Return normally: every unsettled message is acknowledged. */
  | 'ok'
  /** Wait `slowMs`, then return. */
  | 'slow'
  /** `acknowledge(id)` each message, then return. */
  | 'ackEach'
  /** `acknowledgeAll()`, then return. */
  | 'ackAll'
  /** Each message by its own plan: acknowledge the good ones, retry the failing ones; return. */
  | 'mixed'
  /** Like `mixed` for the first half of the batch only, then throw: the rest is retried. */
  | 'mixedThrow'
  /** Like `mixed`, then wait `slowMs` × 3 before returning (settlements well before the end). */
  | 'mixedSlow'
  /** Return at once; acknowledge after returning (timers and `ctx.waitUntil`). */
  | 'late'
  /** Acknowledge each message twice and retry it once more: the later calls must reject. */
  | 'double'
  /** Throw: every unsettled message is retried. */
  | 'throw'
  /** `retryAll(0)`, then return. */
  | 'retryAll'
  /** Never return: cut off by the worker timeout, every unsettled message is retried. */
  | 'hang';

/** Modes after which a message is not acknowledged by its own plan. */
export const FAILING_MODES: ReadonlySet<Mode> = new Set(['throw', 'retryAll', 'hang', 'mixedThrow']);

export interface MessagePlan {
  /** Mode per attempt (1-based: `modes[attempts - 1]`, the last one repeating). */
  modes: Mode[];
  slowMs: number;
}

export interface ConsumerShape {
  maxBatchSize: number;
  maxBatchTimeoutSeconds: number;
  maxConcurrency: number;
  maxRetries: number;
  retryDelaySeconds: number;
  /** With a dead-letter queue (and a recording consumer on it), else exhausted messages are dropped. */
  deadLetter: boolean;
}

export type DeliveryCrashPoint =
  | 'delivery.after-register'
  | 'delivery.after-settle'
  | 'delivery.mid-finalize'
  | 'delivery.after-release-claim'
  | 'delivery.after-dead-letter-send';
export type OperationCrashPoint =
  | 'operation.after-accept'
  | 'operation.after-dispatch-mark'
  | 'operation.after-backend'
  | 'operation.after-settle';

export type Step =
  /** Send these messages (by sequence number); `duplicates` are sent once more, as separate messages. */
  | { kind: 'send'; seqs: number[]; multi: boolean; duplicates: number[] }
  | { kind: 'pause'; ms: number }
  /**
   * Crash one stand-in of the running Host after `afterMs` (HostControl.killStandIn says how); the Host restarts it. With
   * `again`, its successor is killed too, that long after it appeared (a longer outage).
   */
  | { kind: 'standin'; which: 'dynamodb' | 'sqs'; afterMs: number; again?: number }
  /** Create an extra queue Resource (the request sent twice with one key) and maybe delete it. */
  | { kind: 'ops'; name: string; remove: boolean }
  /** Boundary: the running Host dies at its armed crash point (bounded wait), then restarts. */
  | { kind: 'crash'; point: DeliveryCrashPoint | OperationCrashPoint; nth: number; boundMs: number }
  /** Boundary: `kill -9` of the Host after `afterMs`, then a restart on the same data folder. */
  | { kind: 'kill9'; afterMs: number }
  /** Boundary: SIGTERM (graceful stop, exit 0 expected), then a restart. */
  | { kind: 'term' }
  /**
   * Update the main consumer's maxConcurrency through the Host API, as a user would (PUT with the
   * expected generation, sent twice with one key), and wait until its Operation succeeded.
   */
  | { kind: 'update'; maxConcurrency: number }
  /**
   * Wait (at most `boundMs`) until at least `atLeast` handlers of the main consumer run, so that
   * the next step happens while they do.
   */
  | { kind: 'busy'; atLeast: number; boundMs: number };

/**
 * `short` (what `npm test` runs): shortened timings, no AWS faults. `truth`: full-size schedules
 * in one of three variants drawn from the seed — default timings; default timings with AWS faults
 * (TAKOFORM_FAULTS); shortened timings with AWS faults (more faults per minute). `full` draws
 * from those three and `classic` (shortened timings, no faults) alike.
 */
export type Profile = 'full' | 'short' | 'truth';

/** `chaos`: the shortened CHAOS_TUNING; `default`: the Host's own defaults (worker timeout 900 s). */
export type Timing = 'chaos' | 'default';
export type Variant = 'classic' | 'defaults' | 'defaults+faults' | 'faults';

export interface Schedule {
  seed: number;
  profile: Profile;
  consumer: ConsumerShape;
  /** Sequence numbers 0..messages-1 (the health probe's message is `messages`). */
  messages: number;
  plans: MessagePlan[];
  /** Whether the setup's duplicate create requests run at the same time (else one after the other). */
  parallelDuplicates: boolean;
  steps: Step[];
  /** TAKOFORM_CRASH_AT of each Host incarnation, in start order (undefined: none armed). */
  arms: (string | undefined)[];
  variant: Variant;
  timing: Timing;
  /** TAKOFORM_FAULTS of every incarnation (lambdas/local/faults/); undefined: none. */
  faults: string | undefined;
  /**
   * The maxConcurrency updates of the schedule, in order (see updateBlock): 1 ↔ 40 or 30 → 10,
   * drawn for some seeds of the `full` and `truth` profiles; empty otherwise.
   */
  updates: number[];
  /** Whether TAKOFORM_FAULTS holds the kinds that reproduce AWS's answers lost after the fact. */
  lostAnswers: boolean;
  /**
   * The slot layout (slot-groups.ts): for odd seeds one slot item per partition key
   * (TAKOFORM_SHARDS_PER_GROUP=1), so that a consumer of maxConcurrency 2 or 3 spans several
   * groups; for seeds 2, 6, 10, … ten slots per item (TAKOFORM_SLOTS_PER_SHARD=10, the earlier
   * layout, which shares items between lanes); the default otherwise.
   */
  slotsPerShard?: number;
  shardsPerGroup?: number;
  /**
   * TAKOFORM_PHYSICS: the stand-ins enforce AWS's throughput limits divided by this factor
   * (transaction conflicts, per-partition throughput, Lambda's concurrency), for every sixth seed
   * of the `full` and `truth` profiles; undefined otherwise.
   */
  physics?: number;
}

/** The scale factor of the seeds run with AWS's throughput physics (limits divided by it). */
export const CHAOS_PHYSICS_SCALE = 10;

export const isBoundary = (s: Step): s is Extract<Step, { kind: 'crash' | 'kill9' | 'term' }> =>
  s.kind === 'crash' || s.kind === 'kill9' || s.kind === 'term';

const GOOD: readonly (readonly [Mode, number])[] = [
  ['ok', 4],
  ['slow', 2],
  ['ackEach', 2],
  ['ackAll', 2],
  ['mixed', 3],
  ['mixedSlow', 2],
  ['late', 2],
  ['double', 1],
];
const BAD: readonly (readonly [Mode, number])[] = [
  ['throw', 4],
  ['retryAll', 2],
  ['mixedThrow', 3],
  ['hang', 1],
];

/** Without `hang`: at default timings a hung handler is cut off only after 900 s. */
const BAD_NO_HANG = BAD.filter(([m]) => m !== 'hang');

function planFor(rng: Rng, hang = true): MessagePlan {
  const bad = hang ? BAD : BAD_NO_HANG;
  const kind = rng.weighted([
    ['good', 55],
    ['flaky', 27],
    ['poison', 18],
  ] as const);
  const modes: Mode[] = [];
  if (kind === 'good') modes.push(rng.weighted(GOOD));
  else if (kind === 'flaky') {
    for (let i = rng.int(1, 2); i > 0; i--) modes.push(rng.weighted(bad));
    modes.push(rng.weighted(GOOD));
  } else {
    for (let i = rng.int(1, 3); i > 0; i--) modes.push(rng.weighted(bad));
  }
  return { modes, slowMs: rng.int(50, 400) };
}

type Fault = 'crashDelivery' | 'crashOperation' | 'kill9' | 'standin' | 'term';

/**
 * The AWS faults of a `truth` schedule: rates AWS reaches under load, high enough that a run of a
 * few hundred requests meets each kind several times. The fault seed is the schedule's seed.
 */
function awsFaultsFor(rng: Rng, seed: number): string {
  return JSON.stringify({
    seed,
    dynamodb: {
      throttle: rng.pick([0.01, 0.03, 0.05]),
      unprocessed: rng.pick([0.2, 0.5]),
      transactionThrottle: rng.pick([0, 0.01, 0.03]),
      serviceError: rng.pick([0, 0.01]),
    },
    sqs: {
      throttle: rng.pick([0.01, 0.03]),
      serviceError: rng.pick([0, 0.01]),
      batchEntryFailure: rng.pick([0.05, 0.2]),
    },
  });
}

/**
 * AWS's failures that happen after the fact, for some seeds with AWS faults: a request that took
 * effect whose answer is lost (the SDK sends it again), a Lambda invocation whose caller sees an
 * error while it runs on (the state machine starts a second one beside it), and handlers cut off
 * as on Lambda (they run on until their invocation ends). From a stream of its own, so every
 * other draw of a seed stays as it was.
 */
function lostAnswerFaults(seed: number): Record<string, Record<string, unknown>> | undefined {
  const rng = createRng((seed ^ 0x2545f491) >>> 0);
  if (!rng.chance(0.6)) return undefined;
  return {
    dynamodb: { lostAnswer: rng.pick([0.01, 0.03, 0.05]) },
    sqs: { lostAnswer: rng.pick([0.01, 0.03, 0.05]) },
    // A schedule makes few worker invocations (each runs up to 100 batches): a higher rate
    // there, so that a second runner beside the first happens at all.
    localInvoke: {
      overlap: rng.pick([0.02, 0.05]),
      functions: { worker: { overlap: rng.pick([0.1, 0.2, 0.3]) } },
      lambdaCutOff: true,
    },
  };
}

/** AWS's faults as TAKOFORM_FAULTS, the lost answers merged into their services. */
function faultsJson(base: string, extra: Record<string, Record<string, unknown>> | undefined): string {
  if (!extra) return base;
  const config = JSON.parse(base) as Record<string, unknown>;
  for (const [service, rates] of Object.entries(extra))
    config[service] = { ...((config[service] as Record<string, unknown> | undefined) ?? {}), ...rates };
  return JSON.stringify(config);
}

/** Plans of the messages sent while an update runs: handlers that take long enough to overlap it. */
function burstPlan(rng: Rng, timing: Timing): MessagePlan {
  // Long enough that many still run when the update succeeds and the new generation's lanes
  // start beside them; shortened timings cut a handler off after 2 s, so these end just before.
  const slowMs = timing === 'chaos' ? rng.int(900, 1_900) : rng.int(2_000, 8_000);
  // At shortened timings some hang on their first delivery: cut off while others run.
  const first = rng.weighted<Mode | undefined>([
    [undefined, 7],
    ['throw', 2],
    [timing === 'chaos' ? 'hang' : 'throw', 1],
  ]);
  return { modes: first ? [first, 'slow'] : ['slow'], slowMs };
}

/**
 * The maxConcurrency updates of one seed, if it draws them: the steps (updates, and the messages
 * sent so that handlers run while they happen) and the plans of those messages, whose sequence
 * numbers start at `firstSeq`.
 */
function updateBlock(
  seed: number,
  firstSeq: number,
  batchSize: number,
  timing: Timing,
): { updates: number[]; steps: Step[]; plans: MessagePlan[]; at: number } | undefined {
  const rng = createRng((seed ^ 0x3c6ef372) >>> 0);
  if (!rng.chance(0.4)) return undefined;
  const updates = rng.pick([
    [40, 1],
    [1, 40],
    [30, 10],
  ]);
  const [first, second] = updates as [number, number];
  // Enough batches to run more handlers than the lower bound when the update comes.
  const batches = first === 30 ? rng.int(14, 20) : rng.int(6, 10);
  const plans: MessagePlan[] = [];
  const burst = (n: number): Step[] => {
    const seqs = Array.from({ length: n }, () => firstSeq + plans.push(burstPlan(rng, timing)) - 1);
    const out: Step[] = [];
    for (let i = 0; i < seqs.length; i += 10)
      out.push({ kind: 'send', seqs: seqs.slice(i, i + 10), multi: true, duplicates: [] });
    return out;
  };
  // More handlers than the lower bound allows, so a start beside them after a lowering counts.
  const atLeast = Math.min(first, Math.min(first, second) + 1, batches);
  const steps: Step[] = [
    { kind: 'update', maxConcurrency: first },
    ...burst(batches * batchSize),
    // An update takes effect when the new generation's lanes start: that may take the
    // supervisor's round (a minute at default timings).
    { kind: 'busy', atLeast, boundMs: timing === 'chaos' ? 20_000 : 75_000 },
    { kind: 'pause', ms: rng.int(0, 300) },
    { kind: 'update', maxConcurrency: second },
    { kind: 'pause', ms: rng.int(200, 1_000) },
    ...burst(rng.int(3, 6)),
  ];
  return { updates, steps, plans, at: rng.next() };
}

/** The schedule of one seed (pure: no clock, no global state). */
export function scheduleFor(seed: number, profile: Profile = 'full'): Schedule {
  const rng = createRng(seed);
  const short = profile === 'short';
  // The variant and its faults come from a stream of their own, so `full` and `short` keep
  // exactly the schedules (and replays) they had.
  const variantRng = createRng((seed ^ 0x7f4a7c15) >>> 0);
  const variant: Variant =
    profile === 'truth'
      ? variantRng.pick<Variant>(['defaults', 'defaults+faults', 'faults'])
      : profile === 'full'
        ? variantRng.pick<Variant>(['classic', 'defaults', 'defaults+faults', 'faults'])
        : 'classic';
  const timing: Timing = variant === 'defaults' || variant === 'defaults+faults' ? 'default' : 'chaos';
  const awsFaults =
    variant === 'defaults+faults' || variant === 'faults' ? awsFaultsFor(variantRng, seed) : undefined;
  const consumer: ConsumerShape = {
    maxBatchSize: rng.int(1, 4),
    maxBatchTimeoutSeconds: rng.chance(0.2) ? 1 : 0,
    maxConcurrency: rng.int(1, 3),
    maxRetries: rng.int(0, 2),
    // Odd seeds at chaos timings retry after 3 s: hidden 1 s, then deferred (TAKOFORM_DEFER_AFTER_MS).
    retryDelaySeconds: rng.chance(0.25) ? (timing === 'chaos' && seed % 2 === 1 ? 3 : 1) : 0,
    deadLetter: rng.chance(0.7),
  };
  const messages = short ? rng.int(6, 10) : rng.int(12, 26);
  const plans = Array.from({ length: messages }, () => planFor(rng, timing === 'chaos'));
  const parallelDuplicates = rng.chance(0.6);

  const faultCount = short ? 1 : rng.int(1, 3);
  const faults: Fault[] = [];
  for (let i = 0; i < faultCount; i++) {
    faults.push(
      rng.weighted<Fault>([
        ['crashDelivery', 34],
        ['crashOperation', 14],
        ['kill9', 26],
        ['standin', 22],
        ['term', short ? 0 : 4],
      ]),
    );
  }
  // Waves: one before each fault and one after the last.
  const order = rng.shuffle(Array.from({ length: messages }, (_, i) => i));
  const cuts = new Set<number>();
  while (cuts.size < Math.min(faultCount, messages - 1)) cuts.add(rng.int(1, messages - 1));
  const bounds = [0, ...[...cuts].sort((a, b) => a - b), messages];
  const waves: number[][] = [];
  for (let i = 0; i + 1 < bounds.length; i++) waves.push(order.slice(bounds[i], bounds[i + 1]));
  while (waves.length < faultCount + 1) waves.push([]);

  const sendStep = (seqs: number[]): Step => ({
    kind: 'send',
    seqs,
    multi: seqs.length > 1 && rng.chance(0.4),
    duplicates: seqs.filter(() => rng.chance(0.1)),
  });
  const steps: Step[] = [];
  let opsCount = 0;
  const opsStep = (remove: boolean): Step => ({ kind: 'ops', name: `extra-${opsCount++}`, remove });
  for (const [i, fault] of faults.entries()) {
    const wave = waves[i] ?? [];
    if (wave.length > 0) steps.push(sendStep(wave));
    switch (fault) {
      case 'crashDelivery': {
        const points: DeliveryCrashPoint[] = [
          'delivery.after-register',
          'delivery.after-settle',
          'delivery.mid-finalize',
          'delivery.after-release-claim',
        ];
        if (consumer.deadLetter) points.push('delivery.after-dead-letter-send');
        const point = rng.pick(points);
        // Occurrences the wave before can plausibly reach: about one per two messages, at most 3.
        const reach = Math.max(1, Math.min(3, Math.ceil(wave.length / 2)));
        const nth = point === 'delivery.after-dead-letter-send' ? 1 : rng.int(1, reach);
        if (rng.chance(0.3)) steps.push(opsStep(rng.chance(0.5)));
        steps.push({ kind: 'crash', point, nth, boundMs: 8_000 });
        break;
      }
      case 'crashOperation': {
        const point = rng.pick<OperationCrashPoint>([
          'operation.after-accept',
          'operation.after-dispatch-mark',
          'operation.after-backend',
          'operation.after-settle',
        ]);
        const remove = rng.chance(0.6);
        // An incarnation's count starts at 0: the first one also runs the setup's creates.
        steps.push(opsStep(remove));
        steps.push({ kind: 'crash', point, nth: remove ? rng.int(1, 2) : 1, boundMs: 8_000 });
        break;
      }
      case 'kill9':
        if (rng.chance(0.25)) steps.push(opsStep(rng.chance(0.5)));
        steps.push({ kind: 'kill9', afterMs: rng.int(150, 2_500) });
        break;
      case 'standin':
        steps.push({
          kind: 'standin',
          which: rng.chance(0.5) ? 'dynamodb' : 'sqs',
          afterMs: rng.int(0, 1_500),
          ...(rng.chance(0.35) ? { again: rng.int(200, 1_200) } : {}),
        });
        if (rng.chance(0.3)) steps.push(opsStep(true));
        break;
      case 'term':
        steps.push({ kind: 'pause', ms: rng.int(100, 1_000) });
        steps.push({ kind: 'term' });
        break;
    }
  }
  const last = waves[faultCount] ?? [];
  if (last.length > 0) steps.push(sendStep(last));
  if (!short && rng.chance(0.3)) steps.push(opsStep(rng.chance(0.5)));

  // Drawn last, from streams of their own, so that every schedule drawn before stays as it was.
  const block = short ? undefined : updateBlock(seed, messages, consumer.maxBatchSize, timing);
  if (block) steps.splice(Math.floor(block.at * (steps.length + 1)), 0, ...block.steps);
  const lost = awsFaults === undefined || short ? undefined : lostAnswerFaults(seed);

  const arms: (string | undefined)[] = steps
    .filter(isBoundary)
    .map((s) => (s.kind === 'crash' ? `${s.point}@${s.nth}` : undefined));
  // The incarnation after the last boundary runs to the end with nothing armed.
  arms.push(undefined);
  return {
    seed,
    profile,
    consumer,
    messages: messages + (block?.plans.length ?? 0),
    plans: [...plans, ...(block?.plans ?? [])],
    parallelDuplicates,
    steps,
    arms,
    variant,
    timing,
    faults: awsFaults === undefined ? undefined : faultsJson(awsFaults, lost),
    updates: block?.updates ?? [],
    lostAnswers: lost !== undefined,
    // From the seed alone, so every schedule drawn before stays as it was.
    ...(seed % 2 === 1 ? { shardsPerGroup: 1 } : seed % 4 === 2 ? { slotsPerShard: 10 } : {}),
    ...(!short && seed % 6 === 0 ? { physics: CHAOS_PHYSICS_SCALE } : {}),
  };
}

/** One line per step, for logs and for replaying a seed by eye. */
export function describeSchedule(s: Schedule): string {
  const c = s.consumer;
  const head =
    `seed ${s.seed} (${s.profile}): ${s.messages} messages; consumer batch≤${c.maxBatchSize} ` +
    `timeout ${c.maxBatchTimeoutSeconds}s concurrency≤${c.maxConcurrency} retries ${c.maxRetries} ` +
    `delay ${c.retryDelaySeconds}s ${c.deadLetter ? 'with' : 'without'} DLQ` +
    (s.variant === 'classic'
      ? ''
      : `; ${s.variant} (${s.timing} timings${s.faults ? `, TAKOFORM_FAULTS=${s.faults}` : ''})`) +
    (s.shardsPerGroup !== undefined ? `; ${s.shardsPerGroup} slot item per partition key` : '') +
    (s.slotsPerShard !== undefined ? `; ${s.slotsPerShard} slots per item` : '') +
    (s.physics !== undefined ? `; AWS physics, limits ÷ ${s.physics}` : '') +
    (s.updates.length ? `; maxConcurrency updates ${s.updates.join(' → ')}` : '');
  const steps = s.steps.map(stepLabel);
  return `${head}\n  ${steps.join('\n  ')}`;
}

function stepLabel(st: Step): string {
  switch (st.kind) {
    case 'send':
      return `send ${st.seqs.length}${st.multi ? ' (one request)' : ''}${st.duplicates.length ? ` +${st.duplicates.length} dup` : ''}`;
    case 'pause':
      return `pause ${st.ms}ms`;
    case 'standin':
      return `kill stand-in ${st.which} after ${st.afterMs}ms${st.again ? `, its successor ${st.again}ms later` : ''}`;
    case 'ops':
      return `ops ${st.name}${st.remove ? ' create+delete' : ' create'}`;
    case 'crash':
      return `crash at ${st.point}@${st.nth}`;
    case 'kill9':
      return `kill -9 after ${st.afterMs}ms`;
    case 'term':
      return 'SIGTERM + restart';
    case 'update':
      return `update maxConcurrency to ${st.maxConcurrency}`;
    case 'busy':
      return `wait until ${st.atLeast} handler(s) run (at most ${st.boundMs}ms)`;
  }
}
