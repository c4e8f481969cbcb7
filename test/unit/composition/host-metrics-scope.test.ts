/**
 * Several Hosts in one account and region: each one's metrics and queue-metric reads are its own.
 */
import { describe, expect, it } from 'vitest';
import { MetricUnit, observability } from '../../../lambdas/composition/aws-observability.ts';
import { newResourceUid } from '../../../lambdas/engine/ids.ts';
import { hostQueuesOnly, QUEUE_UID_LEAD } from '../../../lambdas/shared/aws-env.ts';

/** The EMF document Powertools would print for one metric. */
function emf(env: NodeJS.ProcessEnv) {
  const { metrics } = observability('takoform-supervisor', env);
  metrics.addMetric('BacklogMessages', MetricUnit.Count, 3);
  return metrics.serializeMetrics();
}

describe('Host metrics carry the Host', () => {
  it('OPS-04: every metric has the dimensions {service, host} when TAKOFORM_HOST_NAME is set', () => {
    const doc = emf({ TAKOFORM_HOST_NAME: 'takoform-host-staging' });
    expect(doc._aws.CloudWatchMetrics).toEqual([
      expect.objectContaining({ Namespace: 'Takoform', Dimensions: [['service', 'host']] }),
    ]);
    expect(doc).toMatchObject({ service: 'takoform-supervisor', host: 'takoform-host-staging' });
  });

  it('without it (local tools) the metrics keep the service dimension only; a malformed name fails at cold start', () => {
    expect(emf({})._aws.CloudWatchMetrics[0]?.Dimensions).toEqual([['service']]);
    expect(() => emf({ TAKOFORM_HOST_NAME: 'Bad Host' })).toThrow(/TAKOFORM_HOST_NAME/);
  });
});

describe('queue metrics read by the supervisor', () => {
  it('keeps only the series of queues whose name starts with the exact prefix', () => {
    const series = [
      { Label: 'takoform-host_r01A', Values: [1] },
      { Label: 'takoform-host-staging_r01B', Values: [2] },
      { Label: 'eu-takoform-host_r01C', Values: [3] },
      { Label: 'takoform-host_r01D', Values: [4] },
      { Values: [5] },
    ];
    expect(hostQueuesOnly(series, 'takoform-host_').map((s) => s.Label)).toEqual([
      'takoform-host_r01A',
      'takoform-host_r01D',
    ]);
    expect(hostQueuesOnly(series, 'takoform-host-staging_').map((s) => s.Label)).toEqual([
      'takoform-host-staging_r01B',
    ]);
  });

  it('the search term ends with the first character of every Resource uid', () => {
    expect(newResourceUid().startsWith(QUEUE_UID_LEAD)).toBe(true);
    // A digit follows it, so CloudWatch makes it a token of its own.
    expect(newResourceUid().charAt(1)).toMatch(/[0-9]/);
  });
});
