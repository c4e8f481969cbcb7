/**
 * RC-02 / RC-04: a stand-in is "up" only when its own process says it listens, never because
 * something answers on a port. Found in CI: a restarted Host probed a free port for DynamoDB
 * Local, the SQS stand-in (started at the same moment) was given that port by the system, the
 * probe was answered by it, and the Host's first DynamoDB call died at start-up with the SQS
 * stand-in's `InvalidAction`. Here another server holds the asked port on purpose.
 */
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { ListTablesCommand } from '@aws-sdk/client-dynamodb';
import { ListQueuesCommand } from '@aws-sdk/client-sqs';
import { afterEach, describe, expect, it } from 'vitest';
import { dynamoDbClient, sqsClient } from '../../../lambdas/adapters/aws/clients.ts';
import type { StandIn } from '../../../lambdas/local/standins/child-process.ts';
import { startDynamoDbLocal } from '../../../lambdas/local/standins/dynamodb-local.ts';
import { startSqsServer } from '../../../lambdas/local/standins/sqs-server.ts';

const started: StandIn[] = [];
const servers: http.Server[] = [];
afterEach(async () => {
  await Promise.all(started.splice(0).map((s) => s.stop()));
  for (const s of servers.splice(0)) s.close();
});

/** A server on 127.0.0.1 that answers every request the way the SQS stand-in answers a DynamoDB call. */
async function impostor(): Promise<{ port: number; requests: () => number }> {
  let requests = 0;
  const server = http.createServer((req, res) => {
    requests++;
    req.resume();
    res.writeHead(400, { 'content-type': 'application/x-amz-json-1.0' });
    res.end(JSON.stringify({ __type: 'com.amazonaws.sqs#InvalidAction', message: 'Unknown action' }));
  });
  servers.push(server);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { port: (server.address() as AddressInfo).port, requests: () => requests };
}

describe('RC-02 stand-ins at start-up', () => {
  it('RC-02: DynamoDB Local asked for a port another server answers on fails to start instead of reporting that server', async () => {
    const other = await impostor();
    await expect(startDynamoDbLocal({ port: other.port })).rejects.toThrow(
      /DynamoDB Local exited during start-up/,
    );
    // The impostor was never taken for DynamoDB Local (the old readiness probe POSTed to it).
    expect(other.requests()).toBe(0);
  });

  it('RC-02: the SQS stand-in asked for a taken port fails to start', async () => {
    const other = await impostor();
    await expect(startSqsServer({ port: other.port })).rejects.toThrow(/SQS stand-in exited during start-up/);
    expect(other.requests()).toBe(0);
  });

  it('RC-02: started together without a port, each stand-in reports the port it bound itself and answers as itself', async () => {
    // The start-up of a Host, repeated: both at once, each on a port the system gives it.
    for (let round = 0; round < 3; round++) {
      const [ddb, sqs] = await Promise.all([startDynamoDbLocal(), startSqsServer()]);
      started.push(ddb, sqs);
      expect(ddb.endpoint).not.toBe(sqs.endpoint);
      const tables = await dynamoDbClient(ddb.endpoint).send(new ListTablesCommand({}));
      expect(tables.TableNames).toEqual([]);
      const queues = await sqsClient(sqs.endpoint).send(new ListQueuesCommand({}));
      expect(queues.QueueUrls ?? []).toEqual([]);
      await Promise.all(started.splice(0).map((s) => s.stop()));
    }
  });
});
