import { ConfigError } from './config.ts';

/**
 * Delivery timings of the local Host. Defaults suit interactive use; the fault-injection suite
 * shortens them (environment variables) so that recovery after `kill -9` takes seconds.
 */
export function deliveryTuning(env: NodeJS.ProcessEnv, workerTimeoutSeconds: number) {
  const read = (name: string, min: number, max: number, fallback: number) => {
    const raw = env[name];
    if (raw === undefined || raw === '') return fallback;
    if (!/^\d+$/.test(raw) || Number(raw) < min || Number(raw) > max) {
      throw new ConfigError(`${name} must be an integer in ${min}..${max}, got ${JSON.stringify(raw)}`);
    }
    return Number(raw);
  };
  return {
    /** Time after a batch deadline within which recovery runs, before its messages can return. */
    graceMs: read(
      'TAKOFORM_DELIVERY_GRACE_MS',
      500,
      3_600_000,
      Math.min(60_000, Math.max(5_000, workerTimeoutSeconds * 100)),
    ),
    /** How long an idle lane long-polls before resting. */
    idleWaitSeconds: read('TAKOFORM_IDLE_WAIT_SECONDS', 0, 20, 10),
    /**
     * Room in a slot's deadline beyond idle wait + batch timeout + worker timeout, for
     * registration and finalisation. A crashed batch's slot frees this long after its handler
     * could last have run, so short values make recovery after `kill -9` fast (tests only).
     */
    slotMarginMs: read('TAKOFORM_SLOT_MARGIN_MS', 1000, 600_000, 30_000),
    /**
     * How often the supervisor round runs (AWS: every minute). Sends through the Host wake their
     * consumer at once; the round starts lanes for messages sent straight to SQS and recovers
     * batches whose deadline passed.
     */
    supervisorSeconds: read('TAKOFORM_SUPERVISOR_SECONDS', 1, 3_600, 60),
    /**
     * Slots per DynamoDB item of a consumer's slot map, and items per partition key (the layout
     * in `slot-groups.ts`; every process of a Host must use the same). The chaos suite puts a few
     * items in a group, so that a small maxConcurrency spans several partition keys.
     */
    slotsPerShard: read('TAKOFORM_SLOTS_PER_SHARD', 1, 10, 1),
    shardsPerGroup: read('TAKOFORM_SHARDS_PER_GROUP', 1, 1_000, 25),
    /**
     * Messages received this long or more before they are due are sent again as delayed copies
     * rather than hidden in flight (`deferrals.ts`; AWS: 60 s). The chaos suite shortens it so
     * its retry delays of seconds take that path.
     */
    deferAfterMs: read('TAKOFORM_DEFER_AFTER_MS', 500, 3_600_000, 60_000),
    /** How often the console's chart samples each queue's counts (kept for the last hour). */
    historySeconds: read('TAKOFORM_HISTORY_SECONDS', 1, 600, 15),
    /** How often `observed` (queue message counts, consumer facts) is refreshed (AWS: every minute). */
    observeSeconds: read('TAKOFORM_OBSERVE_SECONDS', 1, 3_600, 10),
  };
}

/** The tunings the delivery service itself takes (the others time the local Host's loops). */
export function serviceTuning(t: ReturnType<typeof deliveryTuning>) {
  const { graceMs, idleWaitSeconds, slotMarginMs, slotsPerShard, shardsPerGroup, deferAfterMs } = t;
  return { graceMs, idleWaitSeconds, slotMarginMs, slotsPerShard, shardsPerGroup, deferAfterMs };
}
