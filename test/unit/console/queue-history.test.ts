/**
 * The local Host's bounded memory of queue counts behind the console's chart: one hour at most,
 * a bounded number of samples and queues, acknowledgements counted into the next sample.
 */
import { describe, expect, it } from 'vitest';
import { QueueHistorySampler } from '../../../lambdas/local/queue-history-sampler.ts';
import { QueueHistory } from '../../../lambdas/operator/queue-history.ts';

const counts = (visible: number) => ({ visible, inFlight: 1, delayed: 0 });

describe('QueueHistory', () => {
  it('counts acknowledgements into the next sample only', () => {
    let now = 1_000_000;
    const h = new QueueHistory(15, () => now);
    h.acknowledged('q1', 3);
    h.acknowledged('q1', 2);
    h.record('q1', counts(7));
    now += 15_000;
    h.record('q1', counts(4));
    expect(h.viewOf('q1').samples).toEqual([
      { at: 1_000_000, visible: 7, inFlight: 1, delayed: 0, acknowledged: 5 },
      { at: 1_015_000, visible: 4, inFlight: 1, delayed: 0, acknowledged: 0 },
    ]);
    expect(h.viewOf('q1')).toMatchObject({ available: true, intervalSeconds: 15, windowSeconds: 3600 });
  });

  it('keeps no sample older than an hour and at most 720 per queue', () => {
    let now = 0;
    const h = new QueueHistory(1, () => now);
    for (let i = 0; i < 2_000; i++) {
      now = i * 1_000;
      h.record('q', counts(i));
    }
    const s = h.viewOf('q').samples;
    expect(s).toHaveLength(720);
    expect(s.at(-1)?.visible).toBe(1_999);
    now += 3_600_001;
    h.record('q', counts(0));
    expect(h.viewOf('q').samples).toHaveLength(1);
  });

  it('tracks at most 500 queues, forgetting the one untouched longest', () => {
    let now = 0;
    const h = new QueueHistory(15, () => now);
    for (let i = 0; i < 501; i++) {
      now = i;
      h.record(`q${i}`, counts(i));
    }
    expect(h.watched()).toHaveLength(500);
    expect(h.watched()).not.toContain('q0');
    expect(h.watched()).toContain('q500');
  });
});

describe('QueueHistorySampler', () => {
  it('samples the queues consumers read and dead-letter into, and those asked about; forgets gone ones', async () => {
    const h = new QueueHistory(15);
    h.viewOf('asked');
    h.viewOf('gone');
    const seen: string[] = [];
    const sampler = new QueueHistorySampler(
      {
        history: h,
        attachments: {
          listActive: async () => [{ consumerUid: 'c1' }],
          get: async () =>
            ({ spec: { queue: { resourceUid: 'main' }, deadLetterQueue: { resourceUid: 'dlq' } } }) as never,
        },
        stats: async (uid) => {
          seen.push(uid);
          return uid === 'gone' ? undefined : counts(uid.length);
        },
      },
      60_000,
    );
    await sampler.sampleOnce();
    expect(seen.sort()).toEqual(['asked', 'dlq', 'gone', 'main']);
    expect(h.viewOf('main').samples).toHaveLength(1);
    expect(h.viewOf('dlq').samples[0]?.visible).toBe(3);
    expect(h.watched()).not.toContain('gone');
  });
});
