import { describe, expect, it } from 'vitest';
import { cloudWatchOldestAge } from '../../../lambdas/adapters/aws/cloudwatch-queue-age.ts';
import type { QueueTarget } from '../../../lambdas/delivery/ports.ts';

/** The operator's oldest message age on AWS (OPS-04): SQS's own metric for exactly that queue. */
const target: QueueTarget = {
  queueUid: 'r1',
  queueName: 'orders',
  space: 'team',
  sqsUrl: 'https://sqs.eu-west-1.amazonaws.com/123456789012/host-r1',
  defaultDelaySeconds: 0,
  retentionSeconds: 3600,
};

function fakeCloudWatch(values: number[] | undefined) {
  const inputs: unknown[] = [];
  return {
    inputs,
    client: {
      send: async (command: { input: unknown }) => {
        inputs.push(command.input);
        return { MetricDataResults: [{ Id: 'oldest', Values: values }] };
      },
    },
  };
}

describe('cloudWatchOldestAge', () => {
  it("asks for the queue's ApproximateAgeOfOldestMessage, newest first, and answers the latest value", async () => {
    const cw = fakeCloudWatch([42.4, 10]);
    const now = Date.UTC(2026, 11, 1, 12, 0, 0);
    // biome-ignore lint/suspicious/noExplicitAny: a fake client that answers one command
    expect(await cloudWatchOldestAge(cw.client as any, () => now)(target)).toBe(42);
    expect(cw.inputs).toEqual([
      {
        StartTime: new Date(now - 15 * 60_000),
        EndTime: new Date(now),
        ScanBy: 'TimestampDescending',
        MetricDataQueries: [
          {
            Id: 'oldest',
            MetricStat: {
              Metric: {
                Namespace: 'AWS/SQS',
                MetricName: 'ApproximateAgeOfOldestMessage',
                Dimensions: [{ Name: 'QueueName', Value: 'host-r1' }],
              },
              Period: 60,
              Stat: 'Maximum',
            },
          },
        ],
      },
    ]);
  });

  it('answers undefined while CloudWatch has no data point', async () => {
    // biome-ignore lint/suspicious/noExplicitAny: a fake client that answers one command
    expect(await cloudWatchOldestAge(fakeCloudWatch([]).client as any)(target)).toBeUndefined();
    // biome-ignore lint/suspicious/noExplicitAny: a fake client that answers one command
    expect(await cloudWatchOldestAge(fakeCloudWatch(undefined).client as any)(target)).toBeUndefined();
  });
});
