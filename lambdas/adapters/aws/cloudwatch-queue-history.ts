import {
  type CloudWatchClient,
  GetMetricDataCommand,
  type MetricDataResult,
} from '@aws-sdk/client-cloudwatch';
import type { QueueTarget } from '../../delivery/ports.ts';
import {
  HISTORY_WINDOW_MS,
  type QueueHistorySource,
  type QueueHistoryView,
  type QueueSample,
} from '../../operator/queue-history.ts';
import { sqsQueueName } from './cloudwatch-queue-age.ts';

/** SQS publishes its queue metrics once a minute. */
const PERIOD_SECONDS = 60;

/** Each query: the sample field it fills, SQS's metric, and how one minute is summed up. */
const QUERIES = [
  { id: 'visible', metric: 'ApproximateNumberOfMessagesVisible', stat: 'Maximum' },
  { id: 'inFlight', metric: 'ApproximateNumberOfMessagesNotVisible', stat: 'Maximum' },
  { id: 'delayed', metric: 'ApproximateNumberOfMessagesDelayed', stat: 'Maximum' },
  { id: 'acknowledged', metric: 'NumberOfMessagesDeleted', stat: 'Sum' },
] as const;

type Field = (typeof QUERIES)[number]['id'];

/**
 * The console's chart on AWS: the last hour of a queue's SQS metrics, one sample a minute, in
 * one GetMetricData call (the API function may call it; it reads metrics only). CloudWatch is a
 * few minutes behind, and a queue without messages for a while has no data points.
 */
export function cloudWatchQueueHistory(
  cloudwatch: Pick<CloudWatchClient, 'send'>,
  clock: () => number = Date.now,
): QueueHistorySource {
  return {
    view: async (target: QueueTarget): Promise<QueueHistoryView> => {
      const queueName = sqsQueueName(target);
      const now = clock();
      const out = await cloudwatch.send(
        new GetMetricDataCommand({
          StartTime: new Date(now - HISTORY_WINDOW_MS),
          EndTime: new Date(now),
          ScanBy: 'TimestampAscending',
          MetricDataQueries: QUERIES.map((q) => ({
            Id: q.id.toLowerCase(),
            MetricStat: {
              Metric: {
                Namespace: 'AWS/SQS',
                MetricName: q.metric,
                Dimensions: [{ Name: 'QueueName', Value: queueName }],
              },
              Period: PERIOD_SECONDS,
              Stat: q.stat,
            },
          })),
        }),
      );
      return {
        available: true,
        intervalSeconds: PERIOD_SECONDS,
        windowSeconds: HISTORY_WINDOW_MS / 1000,
        samples: samplesOf(out.MetricDataResults ?? []),
      };
    },
  };
}

/** Joins the series by timestamp; a minute one series lacks counts 0 there. */
function samplesOf(results: MetricDataResult[]): QueueSample[] {
  const byTime = new Map<number, QueueSample>();
  for (const q of QUERIES) {
    const r = results.find((x) => x.Id === q.id.toLowerCase());
    const times = r?.Timestamps ?? [];
    for (const [i, t] of times.entries()) {
      const at = new Date(t).getTime();
      const s = byTime.get(at) ?? { at, visible: 0, inFlight: 0, delayed: 0, acknowledged: 0 };
      s[q.id as Field] = Math.round(r?.Values?.[i] ?? 0);
      byTime.set(at, s);
    }
  }
  return [...byTime.values()].sort((a, b) => a.at - b.at);
}
