/**
 * One supervision round over every active consumer: the control loop's periodic part. The AWS
 * supervisor Lambda runs it every minute; the local Host runs the same function on a timer. Per
 * consumer it recovers batches whose slot deadline passed, reads the queue's visible backlog, and
 * lets the control loop start lanes for a backlog no lane is receiving (messages sent straight
 * to SQS, and lanes lost to failures). It also sums the backlog and the dead-letter depth, which
 * the AWS alarms watch.
 */

import { setTimeout as sleep } from 'node:timers/promises';
import { newToken } from '../engine/ids.ts';
import type { Attachment, AttachmentStore } from '../forms/queue-consumer/attachments.ts';
import { forEachBounded } from '../shared/bounded.ts';
import { log } from '../shared/log.ts';
import type { ControlLoop } from './control-loop.ts';
import type { MessageQueue, QueueDirectory, QueueTarget } from './ports.ts';

export interface SupervisionDeps {
  loop: ControlLoop;
  attachments: Pick<AttachmentStore, 'get'> & {
    listActive(): Promise<{ consumerUid: string; generation: number }[]>;
  };
  queueDirectory: QueueDirectory;
  messages: Pick<MessageQueue, 'counts'>;
  /** Runs before a consumer's queue is read (the AWS supervisor tags old queues here). */
  beforeQueue?: (queue: QueueTarget) => Promise<void>;
  /** One round at a time, and where the last one stopped. @default none: no lease, no resume */
  ledger?: SupervisorLedger;
}

export interface SupervisionResult {
  consumers: number;
  /** Consumers this round reached (all of them unless its time ran out). */
  visited: number;
  /** Another round held the lease: this one did nothing. */
  skipped?: true;
  /** The round ran out of time after this consumer: the next starts after it. */
  resumeAfter?: string;
  started: number;
  recovered: number;
  backlog: number;
  deadLetter: number;
}

async function superviseConsumer(
  deps: SupervisionDeps,
  a: Attachment,
  result: SupervisionResult,
  roundAt: number,
) {
  const spec = a.spec;
  const dlqUid = spec.deadLetterQueue?.resourceUid;
  const dlq = dlqUid ? await deps.queueDirectory.queue(dlqUid) : undefined;
  if (dlq) {
    const c = await deps.messages.counts(dlq.sqsUrl);
    result.deadLetter += c.visible + c.delayed;
  }
  const queue = await deps.queueDirectory.queue(spec.queue.resourceUid);
  if (queue) await deps.beforeQueue?.(queue);
  const r = await deps.loop.superviseConsumer(
    {
      consumerUid: a.consumerUid,
      generation: a.generation,
      maxBatchSize: spec.maxBatchSize,
      maxConcurrency: spec.maxConcurrency,
    },
    async () => (queue ? (await deps.messages.counts(queue.sqsUrl)).visible : 0),
    roundAt,
  );
  result.backlog += r.visible;
  result.recovered += r.recovered;
  result.started += r.started;
}

/**
 * The round of one consumer right after its generation became active (an update or a create
 * applied): lanes for its backlog now, rather than at the supervisor's next round. Its old
 * generation's batches still count against the bound; their lanes go on as lanes of the new
 * generation when they next take a slot (`SlotDesk.acquire`). Never throws.
 */
export async function superviseActivated(
  deps: Pick<SupervisionDeps, 'loop' | 'queueDirectory' | 'messages'>,
  a: Attachment,
  now: number,
): Promise<void> {
  try {
    const queue = await deps.queueDirectory.queue(a.spec.queue.resourceUid);
    if (!queue) return;
    const r = await deps.loop.superviseConsumer(
      {
        consumerUid: a.consumerUid,
        generation: a.generation,
        maxBatchSize: a.spec.maxBatchSize,
        maxConcurrency: a.spec.maxConcurrency,
      },
      async () => (await deps.messages.counts(queue.sqsUrl)).visible,
      now,
      { activated: true },
    );
    if (r.started > 0)
      log.info('lanes start for a consumer generation', { consumerUid: a.consumerUid, ...r });
  } catch (err) {
    log.warn('could not start the lanes of a consumer generation; the supervisor will', {
      consumerUid: a.consumerUid,
      err,
    });
  }
}

/** Consumers one round visits at once (each visit is 4–7 AWS calls and its lane starts). */
export const SUPERVISE_PARALLEL = 16;

/** Tries of one consumer's visit within a round, a second apart and then two. */
export const VISIT_TRIES = 3;
const VISIT_RETRY_MS = 1_000;

/** Where a round may start, as the last round left it. */
export interface RoundClaim {
  /** The consumer the last round stopped after (its time ran out); absent: start at the first. */
  resumeAfter?: string;
}

/**
 * One round at a time, and where the last one stopped. On AWS one item in the Host table
 * (`DynamoSupervisorLedger`): the supervisor's schedule delivers at least once and a long round
 * may meet the next minute's, so the lease, not the function's concurrency, keeps rounds apart —
 * it holds with reservations turned off, in the local Host and in tests too.
 */
export interface SupervisorLedger {
  /** The round's lease until `until` (epoch ms), or undefined when another round holds it. */
  claim(holder: string, now: number, until: number): Promise<RoundClaim | undefined>;
  /** Ends the lease and records where the round stopped (undefined: it visited every consumer). */
  release(holder: string, resumeAfter: string | undefined): Promise<void>;
}

/** A ledger in this process's memory: one process's rounds (the local Host's timer, tests). */
export function memorySupervisorLedger(): SupervisorLedger {
  let lease: { holder: string; until: number } | undefined;
  let resumeAfter: string | undefined;
  return {
    claim: async (holder, now, until) => {
      if (lease && lease.holder !== holder && lease.until > now) return undefined;
      lease = { holder, until };
      return resumeAfter === undefined ? {} : { resumeAfter };
    },
    release: async (holder, after) => {
      if (lease?.holder !== holder) return;
      lease = undefined;
      resumeAfter = after;
    },
  };
}

export interface RoundOptions {
  /** Consumers visited at once. @default SUPERVISE_PARALLEL */
  parallel?: number;
  /**
   * No consumer visit starts this long after the round began (visits under way finish); the next
   * round starts after the last consumer visited. @default no limit
   */
  budgetMs?: number;
  /** How long the lease holds if the round never releases it (its process died). @default budget + 60 s */
  leaseMs?: number;
  clock?: () => number;
}

/** The consumers in uid order, starting after `resumeAfter` and wrapping around. */
function rotated<T extends { consumerUid: string }>(active: T[], resumeAfter: string | undefined): T[] {
  const sorted = [...active].sort((a, b) =>
    a.consumerUid < b.consumerUid ? -1 : a.consumerUid > b.consumerUid ? 1 : 0,
  );
  if (resumeAfter === undefined) return sorted;
  const from = sorted.findIndex((a) => a.consumerUid > resumeAfter);
  return from <= 0 ? sorted : [...sorted.slice(from), ...sorted.slice(0, from)];
}

/**
 * `roundAt` (epoch ms) is the time the round was scheduled for: it names the lanes the round
 * starts, so a round delivered twice starts them once. Consumers are visited `parallel` at a
 * time; once `budgetMs` is spent no further visit starts, and the ledger records the last
 * consumer visited, so the next round begins after it (no consumer waits more than a few rounds,
 * however many there are). A round that finds another under way (the ledger's lease) does
 * nothing and says so (`skipped`).
 */
export async function superviseRound(
  deps: SupervisionDeps,
  roundAt: number,
  opts: RoundOptions = {},
): Promise<SupervisionResult> {
  const clock = opts.clock ?? Date.now;
  const began = clock();
  const result: SupervisionResult = {
    consumers: 0,
    visited: 0,
    started: 0,
    recovered: 0,
    backlog: 0,
    deadLetter: 0,
  };
  const ledger = deps.ledger;
  const holder = newToken(12);
  const budget = opts.budgetMs ?? Number.POSITIVE_INFINITY;
  const parallel = opts.parallel ?? SUPERVISE_PARALLEL;
  const leaseMs = opts.leaseMs ?? (Number.isFinite(budget) ? budget + 60_000 : 15 * 60_000);
  const claim = ledger ? await ledger.claim(holder, began, began + leaseMs) : {};
  if (!claim) return { ...result, skipped: true };
  let resumeAfter = claim.resumeAfter;
  try {
    const order = rotated(await deps.attachments.listActive(), claim.resumeAfter);
    result.consumers = order.length;
    const visited = await forEachBounded(
      order,
      parallel,
      async ({ consumerUid }) => {
        for (let attempt = 1; ; attempt++) {
          try {
            const a = await deps.attachments.get(consumerUid);
            if (a?.state !== 'active') return;
            await superviseConsumer(deps, a, result, roundAt);
            return;
          } catch (err) {
            // One consumer's trouble never stops the others. A failed visit (a throttle past the
            // SDK's retries) is tried again within the round: the next round is a minute away, and
            // a consumer whose slots need recovering would wait that long with its backlog. A
            // visit run twice starts nothing twice (its lanes are named by the round).
            if (attempt >= VISIT_TRIES || clock() - began >= budget) {
              log.warn('supervision of a consumer failed', { consumerUid, err, attempts: attempt });
              return;
            }
            await sleep(VISIT_RETRY_MS * attempt);
          }
        }
      },
      // The first wave always starts, so every round makes progress however long its lease took.
      (i) => i < parallel || clock() - began < budget,
    );
    result.visited = visited;
    if (visited < order.length) {
      // Visits start in order, so the first `visited` were all visited.
      resumeAfter = visited > 0 ? order[visited - 1]?.consumerUid : claim.resumeAfter;
      result.resumeAfter = resumeAfter;
      log.info('the supervision round ran out of time; the next one goes on from here', {
        visited,
        consumers: order.length,
        resumeAfter,
      });
    } else {
      resumeAfter = undefined;
    }
  } finally {
    await ledger?.release(holder, resumeAfter).catch((err: unknown) => {
      log.warn('could not release the supervisor lease; it runs out by itself', { err });
    });
  }
  return result;
}
