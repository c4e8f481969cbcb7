/**
 * Which backend the integration suite ran against (OPS-03): one endpoint for every AWS client when
 * TAKOFORM_LOCALSTACK_ENDPOINT is set — then no stand-in was started — and otherwise DynamoDB
 * Local and the SQS stand-in, each on its own 127.0.0.1 port.
 */
import { DescribeTableCommand } from '@aws-sdk/client-dynamodb';
import { GetQueueAttributesCommand } from '@aws-sdk/client-sqs';
import { beforeAll, describe, expect, inject, it } from 'vitest';
import { type AwsTestHost, createAwsTestHost } from '../../support/aws-host-harness.ts';
import { waitFor } from '../../support/delivery-harness.ts';

const FORM_QUEUE = 'https://edge.forms.takoform.com/forms/AtLeastOnceQueue/0.2.0/';
const single = process.env.TAKOFORM_LOCALSTACK_ENDPOINT;

interface StackOf {
  middlewareStack: {
    add(
      mw: (
        next: (args: { request: unknown }) => Promise<unknown>,
      ) => (args: { request: unknown }) => Promise<unknown>,
      opts: { step: 'finalizeRequest'; name: string },
    ): void;
  };
}

/** The origin every request of `client` went to, as the SDK resolved it (not as configured). */
function originsOf(client: StackOf): Set<string> {
  const seen = new Set<string>();
  client.middlewareStack.add(
    (next) => async (args) => {
      const r = args.request as { protocol: string; hostname: string; port?: number };
      seen.add(`${r.protocol}//${r.hostname}:${r.port}`);
      return next(args);
    },
    { step: 'finalizeRequest', name: 'ops03Origin' },
  );
  return seen;
}

describe('the backend of the integration suite', () => {
  let t: AwsTestHost;
  let queueUrl: string;
  const origins = { dynamodb: new Set<string>(), sqs: new Set<string>() };

  beforeAll(async () => {
    t = await createAwsTestHost();
    origins.dynamodb = originsOf(t.dynamodb as unknown as StackOf);
    origins.sqs = originsOf(t.sqs as unknown as StackOf);
    const queue = await t.create(FORM_QUEUE, 'team', 'ops03-q', { messageRetentionSeconds: 3600 });
    expect(queue.status).toBe(202);
    await t.settle();
    const live = await t.host.host.queueDirectory.queue(queue.body.resourceUid);
    if (!live) throw new Error('queue not live');
    queueUrl = live.sqsUrl;
    await t.dynamodb.send(new DescribeTableCommand({ TableName: t.tableName }));
    await t.sqs.send(new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ['QueueArn'] }));
  });

  it('OPS-03 with TAKOFORM_LOCALSTACK_ENDPOINT every request goes to that one endpoint and no stand-in starts; without it, DynamoDB Local and the SQS stand-in serve', async () => {
    if (!single) {
      const started = inject('standIns');
      expect(started.map((s) => s.name).sort()).toEqual(['dynamodb-local', 'sqs']);
      const ddb = new URL(inject('ddbEndpoint'));
      const sqs = new URL(inject('sqsEndpoint'));
      expect([ddb.hostname, sqs.hostname]).toEqual(['127.0.0.1', '127.0.0.1']);
      expect(ddb.port).not.toBe(sqs.port);
      expect([...origins.dynamodb]).toEqual([`http://127.0.0.1:${ddb.port}`]);
      expect([...origins.sqs]).toEqual([`http://127.0.0.1:${sqs.port}`]);
      return;
    }
    const url = new URL(single);
    const origin = `${url.protocol}//${url.hostname}:${url.port}`;
    expect(inject('ddbEndpoint')).toBe(single);
    expect(inject('sqsEndpoint')).toBe(single);
    expect(inject('standIns')).toEqual([]);
    expect([...origins.dynamodb]).toEqual([origin]);
    expect([...origins.sqs]).toEqual([origin]);
    if (process.env.TAKOFORM_ENDPOINT_EMULATOR === 'moto') {
      // moto's state dump names what it holds; neither DynamoDB Local nor fauxqs serves one.
      // moto builds the dump while other test files write to it; a dump that met a change
      // mid-way answers its HTML error page (500), so the dump is asked for again.
      const data = (await waitFor('moto’s state dump', async () => {
        const res = await fetch(`${single}/moto-api/data.json`);
        return res.ok ? await res.json().catch(() => undefined) : undefined;
      })) as {
        dynamodb: { Table: { name: string }[] };
        sqs: { Queue: { name: string }[] };
      };
      expect(data.dynamodb.Table.map((x) => x.name)).toContain(t.tableName);
      expect(data.sqs.Queue.map((x) => x.name)).toContain(queueUrl.split('/').pop());
    }
  });
});
