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

/** Queues this function instance has tagged already. */
const spaceTagged = new Set<string>();

/**
 * Workers may receive only from queues tagged with their Space. Queues created by a Host version
 * before that tag get it here, once per function instance, so an upgrade never stops delivery
 * until each queue Resource happens to be updated.
 */
async function ensureSpaceTag(host: AwsHost, queue: QueueTarget): Promise<void> {
  if (spaceTagged.has(queue.sqsUrl)) return;
  await tagQueueSpace(host.clients.sqs, queue);
  spaceTagged.add(queue.sqsUrl);
}

/**
 * One supervision round over every active consumer; `roundAt` (epoch ms, default the clock's
 * now) names the lanes it starts.
 */
export async function superviseOnce(deps: SupervisorDeps, roundAt?: number): Promise<SupervisorResult> {
  const { host } = deps;
  const now = (deps.clock ?? Date.now)();
  const round = await superviseRound(
    {
      loop: host.host.loop,
      attachments: host.host.attachments,
      queueDirectory: host.host.queueDirectory,
      messages: host.host.messages,
      beforeQueue: (queue) => ensureSpaceTag(host, queue),
    },
    roundAt ?? now,
  );
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
