import { type CloudWatchClient, GetMetricDataCommand } from '@aws-sdk/client-cloudwatch';
import type { QueueTarget } from '../../delivery/ports.ts';
import { hostQueuesOnly, QUEUE_NAME_LABEL, sqsSearchExpression } from '../../shared/aws-env.ts';

/** SQS publishes its metrics every minute; a queue with no metric in this window reports none. */
const WINDOW_MS = 15 * 60_000;

/** The `QueueName` dimension of SQS's metrics: the last segment of the queue URL. */
export const sqsQueueName = (target: QueueTarget): string =>
  new URL(target.sqsUrl).pathname.split('/').at(-1) ?? '';

/**
 * The age of a queue's oldest message as SQS itself reports it on AWS: the latest
 * `ApproximateAgeOfOldestMessage` (a 1-minute maximum, a few minutes behind). Undefined while
 * CloudWatch has no data point for the queue yet (a new or long-empty queue).
 */
export function cloudWatchOldestAge(
  cloudwatch: Pick<CloudWatchClient, 'send'>,
  clock: () => number = Date.now,
) {
  return async (target: QueueTarget): Promise<number | undefined> => {
    const queueName = sqsQueueName(target);
    const now = clock();
    const out = await cloudwatch.send(
      new GetMetricDataCommand({
        StartTime: new Date(now - WINDOW_MS),
        EndTime: new Date(now),
        ScanBy: 'TimestampDescending',
        MetricDataQueries: [
          {
            Id: 'oldest',
            MetricStat: {
              Metric: {
                Namespace: 'AWS/SQS',
                MetricName: 'ApproximateAgeOfOldestMessage',
                Dimensions: [{ Name: 'QueueName', Value: queueName }],
              },
              Period: 60,
              Stat: 'Maximum',
            },
          },
        ],
      }),
    );
    const latest = out.MetricDataResults?.find((r) => r.Id === 'oldest')?.Values?.[0];
    return latest === undefined ? undefined : Math.round(latest);
  };
}

/**
 * The largest `ApproximateAgeOfOldestMessage` over the queues named `<prefix>…` in the last
 * minutes: one search for all of them, each series labelled with its queue name, so another
 * Host's queues that the search also finds are dropped (see `sqsSearchExpression`).
 */
export async function hostQueuesOldestAge(
  cloudwatch: Pick<CloudWatchClient, 'send'>,
  prefix: string,
  now: number,
): Promise<number | undefined> {
  const search = sqsSearchExpression(prefix, 'ApproximateAgeOfOldestMessage', 'Maximum', 300);
  const out = await cloudwatch.send(
    new GetMetricDataCommand({
      StartTime: new Date(now - 15 * 60_000),
      EndTime: new Date(now),
      MetricDataQueries: [{ Id: 'queues', Expression: search, Label: QUEUE_NAME_LABEL, ReturnData: true }],
      ScanBy: 'TimestampDescending',
    }),
  );
  const latest = hostQueuesOnly(out.MetricDataResults ?? [], prefix).flatMap(
    (r) => r.Values?.slice(0, 1) ?? [],
  );
  return latest.length > 0 ? Math.max(...latest) : undefined;
}
