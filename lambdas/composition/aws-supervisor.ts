/**
 * One supervision round as the AWS supervisor runs it: the control loop's periodic part
 * (`delivery/supervision.ts`, which the local Host runs too), plus what only AWS has — the oldest
 * message age from CloudWatch, and the Space tag on queues older Host versions created — and then
 * the background refresh of Resources' `observed`.
 */
import type { CloudWatchClient } from '@aws-sdk/client-cloudwatch';
import { hostQueuesOldestAge } from '../adapters/aws/cloudwatch-queue-age.ts';
import { tagQueueSpace } from '../adapters/aws/sqs-queue-backend.ts';
import type { QueueTarget } from '../delivery/ports.ts';
import { type SupervisionResult, superviseRound } from '../delivery/supervision.ts';
import { log } from '../shared/log.ts';
import type { AwsHost } from './aws-host.ts';

export interface SupervisorDeps {
  host: AwsHost;
  /** For the oldest message age (SQS's own metric, found by queue name prefix). */
  cloudwatch?: Pick<CloudWatchClient, 'send'>;
  /**
   * Read the oldest message age every this many minutes (default 5). GetMetricData is billed
   * per metric returned, i.e. per queue: every 5 minutes keeps it near $0.09 per queue-month.
   */
  oldestAgeEveryMinutes?: number;
  /** When the invocation ends (epoch ms): the round stops starting visits a minute before. */
  endsAt?: number;
  /** No consumer visit starts this long after the round began. @default ROUND_BUDGET_MS */
  roundBudgetMs?: number;
  clock?: () => number;
}

export interface SupervisorResult extends SupervisionResult {
  oldestMessageAgeSeconds: number | undefined;
  /** Resources whose `observed` was looked at and written this minute. */
  observed: { seen: number; refreshed: number };
}

/** The largest oldest-message age over the Host's queues, read every few minutes only. */
async function oldestMessageAge(deps: SupervisorDeps, now: number): Promise<number | undefined> {
  const every = deps.oldestAgeEveryMinutes ?? 5;
  if (!deps.cloudwatch || Math.floor(now / 60_000) % every !== 0) return undefined;
  return hostQueuesOldestAge(deps.cloudwatch, deps.host.config.queueNamePrefix, now);
}

/**
 * Workers may receive only from queues tagged with their Space. Queues created by a Host version
 * before that tag get it here, once per queue: the ledger keeps the queues tagged already (read
 * once a round, at its first queue), and the round adds those it tagged (`tagged`) at its end.
 */
function spaceTagger(host: AwsHost, tagged: Set<string>): (queue: QueueTarget) => Promise<void> {
  let known: Promise<Set<string>> | undefined;
  return async (queue) => {
    known ??= host.host.supervisorLedger.taggedQueues();
    if ((await known).has(queue.queueUid) || tagged.has(queue.queueUid)) return;
    await tagQueueSpace(host.clients.sqs, queue);
    tagged.add(queue.queueUid);
  };
}

/** No consumer visit starts this long after a round began: it ends within its minute. */
export const ROUND_BUDGET_MS = 40_000;
/** Kept at the end of the invocation for the visits under way and the work after the round. */
const ROUND_TAIL_MS = 60_000;

/**
 * One supervision round over the active consumers (as many as its time allows, the rest first in
 * the next round); `roundAt` (epoch ms, default the clock's now) names the lanes it starts. A
 * round that finds another under way does nothing (`skipped`).
 */
export async function superviseOnce(deps: SupervisorDeps, roundAt?: number): Promise<SupervisorResult> {
  const { host } = deps;
  const clock = deps.clock ?? Date.now;
  const now = clock();
  const tagged = new Set<string>();
  const budgetMs = Math.max(
    0,
    Math.min(
      deps.roundBudgetMs ?? ROUND_BUDGET_MS,
      (deps.endsAt ?? Number.POSITIVE_INFINITY) - now - ROUND_TAIL_MS,
    ),
  );
  const round = await superviseRound(
    {
      loop: host.host.loop,
      attachments: host.host.attachments,
      queueDirectory: host.host.queueDirectory,
      messages: host.host.messages,
      beforeQueue: spaceTagger(host, tagged),
      ledger: host.host.supervisorLedger,
    },
    roundAt ?? now,
    { budgetMs, clock },
  );
  if (round.skipped)
    return { ...round, oldestMessageAgeSeconds: undefined, observed: { seen: 0, refreshed: 0 } };
  await host.host.supervisorLedger.addTagged([...tagged]).catch((err: unknown) => {
    log.warn('could not record the queues tagged; a later round tags them again', { err });
  });
  let oldestMessageAgeSeconds: number | undefined;
  try {
    oldestMessageAgeSeconds = await oldestMessageAge(deps, now);
  } catch (err) {
    log.warn('could not read the oldest message age', { err });
  }
  let observed = { seen: 0, refreshed: 0 };
  try {
    observed = await host.host.observer.observeOnce();
  } catch (err) {
    log.warn('could not refresh observed', { err });
  }
  return { ...round, oldestMessageAgeSeconds, observed };
}
