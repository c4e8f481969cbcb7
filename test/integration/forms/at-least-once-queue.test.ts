import { GetQueueAttributesCommand, GetQueueUrlCommand } from '@aws-sdk/client-sqs';
import { beforeAll, describe, expect, it } from 'vitest';
import { createTestHost, FORMS, type TestHost } from '../../support/host-harness.ts';

describe('AtLeastOnceQueue 0.2.0 on the SQS stand-in', () => {
  let host: TestHost;
  beforeAll(async () => {
    host = await createTestHost();
  });

  const sqsName = (uid: string) => `${host.queueNamePrefix}${uid}`;
  const sqsExists = async (uid: string) =>
    host.sqs.send(new GetQueueUrlCommand({ QueueName: sqsName(uid) })).then(
      () => true,
      () => false,
    );

  it('AQ-02 AQ-03 create provisions one SQS queue, update changes retention, delete removes it', async () => {
    const created = await host.create({
      form: FORMS.queue,
      space: 'team',
      name: 'orders',
      spec: { messageRetentionSeconds: 3600 },
    });
    expect(created.status).toBe(202);
    const uid = created.body.resourceUid;
    expect(await sqsExists(uid)).toBe(false); // HA-06: nothing before the executor runs
    const before = await host.request({ path: `/resources/${uid}` });
    expect(before.body.observed).toEqual({});

    await host.settle();
    expect(await sqsExists(uid)).toBe(true);
    const read = await host.request({ path: `/resources/${uid}` });
    expect(read.body).toMatchObject({
      phase: 'idle',
      observed: { queueExists: true, messageCount: 0 },
      output: {},
    });

    const upd = await host.request({
      method: 'PUT',
      path: `/resources/${uid}`,
      body: { spec: { messageRetentionSeconds: 7200, deliveryDelaySeconds: 5000 } },
      headers: { 'idempotency-key': host.newKey(), 'takoform-expected-generation': '1' },
    });
    expect(upd.status).toBe(202);
    await host.settle();
    const url = (await host.sqs.send(new GetQueueUrlCommand({ QueueName: sqsName(uid) }))).QueueUrl;
    const attrs = await host.sqs.send(
      new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['MessageRetentionPeriod'] }),
    );
    expect(attrs.Attributes?.MessageRetentionPeriod).toBe('7200');

    const del = await host.request({
      method: 'DELETE',
      path: `/resources/${uid}`,
      headers: { 'idempotency-key': host.newKey(), 'takoform-expected-generation': '2' },
    });
    expect(del.status).toBe(202);
    await host.settle();
    expect(await sqsExists(uid)).toBe(false);
    expect((await host.request({ path: `/operations/${del.body.id}` })).body.status).toBe('succeeded');
  });

  it('AQ-01 refuses specs outside the closed shape with 422 invalid_spec and creates nothing', async () => {
    for (const spec of [
      {},
      { messageRetentionSeconds: 59 },
      { messageRetentionSeconds: 1_209_601 },
      { messageRetentionSeconds: '3600' },
      { messageRetentionSeconds: 3600.5 },
      { messageRetentionSeconds: 3600, deliveryDelaySeconds: 43_201 },
      { messageRetentionSeconds: 3600, deliveryDelaySeconds: -1 },
      { messageRetentionSeconds: 3600, extra: true },
    ]) {
      const res = await host.create({ form: FORMS.queue, space: 'team', name: 'bad-q', spec });
      expect(res.status, JSON.stringify(spec)).toBe(422);
      expect(res.body.code).toBe('invalid_spec');
    }
    const list = await host.request({ path: '/resources', query: 'space=team&name=bad-q' });
    expect(list.body.items).toEqual([]);
  });
});
