import { type CloudWatchClient, GetMetricDataCommand } from '@aws-sdk/client-cloudwatch';
import type { QueueTarget } from '../../delivery/ports.ts';

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
