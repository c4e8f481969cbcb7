/**
 * The chaos suite's DynamoDB outage (RC-04): SIGHUP to the Host's DynamoDB Local cuts its sockets
 * and every open connection at once, then closes the database and halts. It must fail requests
 * the way an outage does (connections reset, answers lost) while keeping every write it
 * acknowledged, as DynamoDB does. SIGKILL does not (docs/reliability.md, Limits: it lost the
 * last acknowledged writes), so a chaos failure after it would say nothing about the Host.
 */

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import {
  CreateTableCommand,
  DynamoDBClient,
  PutItemCommand,
  ScanCommand,
  TransactWriteItemsCommand,
} from '@aws-sdk/client-dynamodb';
import { afterAll, describe, expect, it } from 'vitest';
import type { StandIn } from '../../../lambdas/local/standins/child-process.ts';
import { startDynamoDbLocal } from '../../../lambdas/local/standins/dynamodb-local.ts';

const TABLE = 'crash';
const WRITERS = 4;
const CRASHES = 3;

const client = (endpoint: string) =>
  new DynamoDBClient({
    endpoint,
    region: 'us-east-1',
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    maxAttempts: 1,
  });

/** Writes until the first failure; returns the ids whose write was answered with success. */
async function writeUntilCut(
  db: DynamoDBClient,
  writer: number,
  round: number,
  acknowledged: string[],
): Promise<string[]> {
  for (let n = 0; ; n++) {
    const id = `r${round}-w${writer}-${n}`;
    try {
      if (n % 2 === 0) {
        await db.send(new PutItemCommand({ TableName: TABLE, Item: { pk: { S: id } } }));
      } else {
        await db.send(
          new TransactWriteItemsCommand({
            TransactItems: [{ Put: { TableName: TABLE, Item: { pk: { S: id } } } }],
          }),
        );
      }
      acknowledged.push(id);
    } catch {
      return acknowledged;
    }
  }
}

async function allIds(db: DynamoDBClient): Promise<Set<string>> {
  const ids = new Set<string>();
  let start: Record<string, never> | undefined;
  do {
    const page = await db.send(new ScanCommand({ TableName: TABLE, ExclusiveStartKey: start }));
    for (const item of page.Items ?? []) ids.add(item.pk?.S ?? '');
    start = page.LastEvaluatedKey as typeof start;
  } while (start);
  return ids;
}

describe('a DynamoDB Local crash (SIGHUP) as the chaos suite makes it', () => {
  const dbPath = mkdtempSync(path.join(tmpdir(), 'takoform-ddb-crash-'));
  let current: StandIn | undefined;
  afterAll(async () => {
    await current?.stop();
    rmSync(dbPath, { recursive: true, force: true });
  });

  it('RC-04: cuts requests in flight and keeps every write it acknowledged, crash after crash', async () => {
    current = await startDynamoDbLocal({ dbPath });
    const port = Number(new URL(current.endpoint).port);
    await client(current.endpoint).send(
      new CreateTableCommand({
        TableName: TABLE,
        AttributeDefinitions: [{ AttributeName: 'pk', AttributeType: 'S' }],
        KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }],
        BillingMode: 'PAY_PER_REQUEST',
      }),
    );
    const acknowledged: string[] = [];
    for (let round = 0; round < CRASHES; round++) {
      const db = client(current.endpoint);
      const lists = Array.from({ length: WRITERS }, () => [] as string[]);
      const writers = lists.map((list, w) => writeUntilCut(db, w, round, list));
      // Crash once every writer has had writes acknowledged (however slow a loaded machine is),
      // then a little later, so the crash meets writes in flight.
      for (let waited = 0; lists.some((l) => l.length < 5) && waited < 60_000; waited += 50)
        await new Promise((r) => setTimeout(r, 50));
      await new Promise((r) => setTimeout(r, 200 * round));
      const crashed = current;
      process.kill(crashed.pid, 'SIGHUP');
      // The crash halts with 137 (as a kill would report); a graceful stop would exit with 0.
      expect(await crashed.exited).toBe(137);
      const written = (await Promise.all(writers)).flat();
      // Every writer wrote until the crash cut it (a writer stops only on a failed request).
      expect(written.length).toBeGreaterThanOrEqual(WRITERS * 5);
      acknowledged.push(...written);
      db.destroy();
      current = await startDynamoDbLocal({ dbPath, port });
    }
    const db = client(current.endpoint);
    const stored = await allIds(db);
    db.destroy();
    const missing = acknowledged.filter((id) => !stored.has(id));
    expect(missing).toEqual([]);
  }, 120_000);
});
