import { describe, expect, it } from 'vitest';
import { cloudWatchOldestAge } from '../../../lambdas/adapters/aws/cloudwatch-queue-age.ts';
import { cloudWatchQueueHistory } from '../../../lambdas/adapters/aws/cloudwatch-queue-history.ts';
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

describe('cloudWatchQueueHistory (the console chart on AWS)', () => {
  it("asks for one hour of the queue's four SQS metrics by the minute and joins them by time", async () => {
    const inputs: unknown[] = [];
    const t = (minute: number) => new Date(Date.UTC(2026, 11, 1, 11, minute));
    const client = {
      send: async (command: { input: unknown }) => {
        inputs.push(command.input);
        return {
          MetricDataResults: [
            { Id: 'visible', Timestamps: [t(1), t(2)], Values: [5, 3.4] },
            { Id: 'inflight', Timestamps: [t(2)], Values: [2] },
            { Id: 'delayed', Timestamps: [], Values: [] },
            { Id: 'acknowledged', Timestamps: [t(2), t(3)], Values: [7, 1] },
          ],
        };
      },
    };
    const now = Date.UTC(2026, 11, 1, 12, 0, 0);
    // biome-ignore lint/suspicious/noExplicitAny: a fake client that answers one command
    const view = await cloudWatchQueueHistory(client as any, () => now).view(target);
    expect(view).toEqual({
      available: true,
      intervalSeconds: 60,
      windowSeconds: 3600,
      samples: [
        { at: t(1).getTime(), visible: 5, inFlight: 0, delayed: 0, acknowledged: 0 },
        { at: t(2).getTime(), visible: 3, inFlight: 2, delayed: 0, acknowledged: 7 },
        { at: t(3).getTime(), visible: 0, inFlight: 0, delayed: 0, acknowledged: 1 },
      ],
    });
    const input = inputs[0] as { StartTime: Date; MetricDataQueries: { Id: string; MetricStat: JsonStat }[] };
    expect(input.StartTime).toEqual(new Date(now - 3_600_000));
    expect(
      input.MetricDataQueries.map((q) => [q.Id, q.MetricStat.Metric.MetricName, q.MetricStat.Stat]),
    ).toEqual([
      ['visible', 'ApproximateNumberOfMessagesVisible', 'Maximum'],
      ['inflight', 'ApproximateNumberOfMessagesNotVisible', 'Maximum'],
      ['delayed', 'ApproximateNumberOfMessagesDelayed', 'Maximum'],
      ['acknowledged', 'NumberOfMessagesDeleted', 'Sum'],
    ]);
    for (const q of input.MetricDataQueries) {
      expect(q.MetricStat.Metric.Dimensions).toEqual([{ Name: 'QueueName', Value: 'host-r1' }]);
      expect(q.MetricStat.Period).toBe(60);
    }
  });
});

interface JsonStat {
  Metric: { MetricName: string; Dimensions: unknown };
  Stat: string;
  Period: number;
}
