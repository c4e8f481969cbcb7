/**
 * The physics models on their own (no endpoint): transactions in flight cancel others and refuse
 * single writes on their items, partitions refuse past their scaled budget, billing rounds as
 * DynamoDB does, Lambda's concurrency pool refuses past the account's and a reservation, and
 * StartExecution is throttled past its token bucket.
 */
import { describe, expect, it } from 'vitest';
import {
  itemBytes,
  readUnits,
  type TableSchema,
  writeUnits,
} from '../../../lambdas/local/physics/dynamodb-items.ts';
import { DynamoPhysics, isRefusal, type Ticket } from '../../../lambdas/local/physics/dynamodb-physics.ts';
import { LambdaConcurrency } from '../../../lambdas/local/physics/lambda-concurrency.ts';
import { parsePhysics, physicsFromEnv } from '../../../lambdas/local/physics/physics-config.ts';
import { StartExecutionBudget } from '../../../lambdas/local/physics/start-execution-budget.ts';
import { TokenBucket } from '../../../lambdas/local/physics/token-bucket.ts';

const schema: TableSchema = {
  table: 't',
  pk: 'pk',
  sk: 'sk',
  indexes: [{ name: 'gsi1', pk: 'gsi1pk', sk: 'gsi1sk' }],
};
const schemas = new Map([['t', schema]]);
const key = (pk: string, sk = '_') => ({ pk: { S: pk }, sk: { S: sk } });

function model(scale: number, clock = { t: 0 }) {
  return { m: new DynamoPhysics(parsePhysics(JSON.stringify({ scale, holdMs: 0 })), () => clock.t), clock };
}

const registration = (batch: string) => ({
  TransactItems: [
    {
      Put: {
        TableName: 't',
        Item: { ...key(`BATCH#${batch}`, 'head'), gsi1pk: { S: 'RECENT#c' }, gsi1sk: { S: batch } },
      },
    },
    { Update: { TableName: 't', Key: key('DISPATCH#c'), UpdateExpression: 'SET registered.#b = :d' } },
    { ConditionCheck: { TableName: 't', Key: key('ATTACH#c'), ConditionExpression: '#state = :active' } },
  ],
});

describe('TAKOFORM_PHYSICS', () => {
  it('is off when unset or empty, a scale factor as a number, or JSON', () => {
    expect(physicsFromEnv({})).toBeUndefined();
    expect(physicsFromEnv({ TAKOFORM_PHYSICS: ' ' })).toBeUndefined();
    const k50 = parsePhysics('50');
    expect(k50).toMatchObject({ scale: 50, writeUnitsPerSecond: 20, readUnitsPerSecond: 60, holdMs: 500 });
    expect(k50.lambda.accountConcurrency).toBe(20);
    const json = parsePhysics(
      '{"scale":10,"transactionMs":4,"partition":"item","lambda":{"reserved":{"worker":50}}}',
    );
    expect(json).toMatchObject({
      holdMs: 40,
      partition: 'item',
      lambda: { accountConcurrency: 100, reserved: { worker: 5 } },
    });
  });

  it('refuses a malformed value naming the problem', () => {
    expect(() => parsePhysics('fast')).toThrow(/TAKOFORM_PHYSICS is neither a number nor JSON/);
    expect(() => parsePhysics('0.5')).toThrow(/scale: must be at least 1/);
    expect(() => parsePhysics('{"scale":2,"speed":1}')).toThrow(/invalid TAKOFORM_PHYSICS/);
  });
});

describe('token buckets', () => {
  it('admit while above zero, go into debt, and refill at their rate up to one second', () => {
    const b = new TokenBucket(10, 0);
    expect(b.admits(0)).toBe(true);
    b.charge(25, 0);
    expect(b.admits(0)).toBe(false);
    expect(b.admits(1000)).toBe(false); // -15 + 10
    expect(b.admits(1600)).toBe(true); // -15 + 16
    expect(b.available(60_000)).toBe(10);
  });
});

describe('transaction conflicts', () => {
  it('cancel a transaction that checks an item another transaction in flight holds, naming it', () => {
    const { m } = model(1);
    const first = m.begin('TransactWriteItems', registration('b1'), schemas);
    expect(isRefusal(first)).toBe(false);
    const second = m.begin('TransactWriteItems', registration('b2'), schemas);
    expect(isRefusal(second) && second.type).toBe('TransactionCanceledException');
    if (!isRefusal(second)) return;
    expect(second.body.CancellationReasons).toEqual([
      { Code: 'None' },
      { Code: 'TransactionConflict', Message: expect.any(String) },
      { Code: 'TransactionConflict', Message: expect.any(String) },
    ]);
    expect(m.snapshot().conflictsByItem).toEqual({ 't:DISPATCH#c / _': 1, 't:ATTACH#c / _': 1 });
    // Once the first is answered, the next one goes through.
    m.finish(first as Ticket, {}, schemas);
    expect(isRefusal(m.begin('TransactWriteItems', registration('b3'), schemas))).toBe(false);
  });

  it('refuse a single write to an item of a transaction in flight with TransactionConflictException', () => {
    const { m } = model(1);
    const tx = m.begin('TransactWriteItems', registration('b1'), schemas) as Ticket;
    const wake = {
      TableName: 't',
      Key: key('DISPATCH#c'),
      UpdateExpression: 'ADD wakes :one',
      ExpressionAttributeValues: { ':one': { N: '1' } },
    };
    const refused = m.begin('UpdateItem', wake, schemas);
    expect(isRefusal(refused) && refused.type).toBe('TransactionConflictException');
    expect(m.snapshot()).toMatchObject({ refusedWrites: 1, cancelledTransactions: 0 });
    m.finish(tx, {}, schemas);
    expect(isRefusal(m.begin('UpdateItem', wake, schemas))).toBe(false);
  });

  it('let single writes and reads of other items through, and cancel a TransactGetItems on an item being written', () => {
    const { m } = model(1);
    m.begin('TransactWriteItems', registration('b1'), schemas);
    expect(isRefusal(m.begin('UpdateItem', { TableName: 't', Key: key('DISPATCH#other') }, schemas))).toBe(
      false,
    );
    expect(isRefusal(m.begin('GetItem', { TableName: 't', Key: key('ATTACH#c') }, schemas))).toBe(false);
    const get = m.begin(
      'TransactGetItems',
      { TransactItems: [{ Get: { TableName: 't', Key: key('ATTACH#c') } }] },
      schemas,
    );
    expect(isRefusal(get) && get.body.CancellationReasons).toEqual([
      { Code: 'TransactionConflict', Message: expect.any(String) },
    ]);
  });
});

describe('partition budgets', () => {
  it('throttle one partition key past 1,000/k write units a second, bill transactions twice, and leave other keys alone', () => {
    const { m, clock } = model(100); // 10 WCU a second per partition
    const wake = {
      TableName: 't',
      Key: key('DISPATCH#c'),
      UpdateExpression: 'ADD wakes :one',
      ExpressionAttributeValues: { ':one': { N: '1' } },
    };
    let admitted = 0;
    let refused = 0;
    for (let i = 0; i < 30; i++) {
      const d = m.begin('UpdateItem', wake, schemas);
      if (isRefusal(d)) {
        refused++;
        expect(d.type).toBe('ProvisionedThroughputExceededException');
        expect(d.body.ThrottlingReasons).toEqual([
          { reason: 'TableWriteKeyRangeThroughputExceeded', resource: expect.stringContaining('table/t') },
        ]);
      } else {
        admitted++;
        m.finish(d, {}, schemas);
      }
    }
    expect([admitted, refused]).toEqual([10, 20]);
    expect(isRefusal(m.begin('UpdateItem', { ...wake, Key: key('DISPATCH#d') }, schemas))).toBe(false);
    clock.t = 1_000;
    // A registration bills 2 WCU per item (3 items, and the index partition of the head).
    const tx = m.begin('TransactWriteItems', registration('b1'), schemas) as Ticket;
    m.finish(tx, {}, schemas);
    const parts = Object.fromEntries(m.snapshot().partitions.map((p) => [p.partition, p.writeUnits]));
    expect(parts).toMatchObject({
      't:DISPATCH#c': 12,
      't:ATTACH#c': 2,
      't:BATCH#b1': 2,
      't/gsi1:RECENT#c': 2,
    });
  });

  it('cancel a throttled transaction with ThrottlingError at the throttled item', () => {
    const { m } = model(1000); // 1 WCU a second
    m.finish(m.begin('UpdateItem', { TableName: 't', Key: key('ATTACH#c') }, schemas) as Ticket, {}, schemas);
    const d = m.begin('TransactWriteItems', registration('b1'), schemas);
    expect(isRefusal(d) && d.body.CancellationReasons).toEqual([
      { Code: 'None' },
      { Code: 'None' },
      { Code: 'ThrottlingError', Message: expect.any(String) },
    ]);
  });

  it('bill reads by the 4 KB of what they returned, a third of a write unit each', () => {
    const { m } = model(1);
    const big = { ...key('QSTATE#q'), blob: { S: 'x'.repeat(9000) } };
    const get = m.begin(
      'GetItem',
      { TableName: 't', Key: key('QSTATE#q'), ConsistentRead: true },
      schemas,
    ) as Ticket;
    m.finish(get, { Item: big }, schemas);
    const q = m.begin(
      'Query',
      {
        TableName: 't',
        IndexName: 'gsi1',
        KeyConditionExpression: '#pk = :p',
        ExpressionAttributeNames: { '#pk': 'gsi1pk' },
        ExpressionAttributeValues: { ':p': { S: 'RECENT#c' } },
      },
      schemas,
    ) as Ticket;
    m.finish(q, { Items: [big, big] }, schemas);
    const parts = Object.fromEntries(m.snapshot().partitions.map((p) => [p.partition, p.readUnits]));
    expect(parts).toEqual({ 't:QSTATE#q': 3, 't/gsi1:RECENT#c': 2.5 });
    // The item's size is remembered: an update of it is billed for the item, not the request.
    const upd = m.begin(
      'UpdateItem',
      { TableName: 't', Key: key('QSTATE#q'), UpdateExpression: 'ADD n :one' },
      schemas,
    ) as Ticket;
    m.finish(upd, {}, schemas);
    expect(m.snapshot().partitions.find((p) => p.partition === 't:QSTATE#q')?.writeUnits).toBe(9);
  });

  it('round sizes as DynamoDB does', () => {
    expect(writeUnits(1)).toBe(1);
    expect(writeUnits(1025)).toBe(2);
    expect(readUnits(4097, true)).toBe(2);
    expect(readUnits(10, false)).toBe(0.5);
    expect(itemBytes({ ab: { S: 'xyz' }, n: { N: '12345' } })).toBe(2 + 3 + 1 + 4);
  });
});

describe('Lambda concurrency', () => {
  const gate = () => {
    let open!: () => void;
    const p = new Promise<void>((r) => (open = r));
    return { p, open };
  };

  it('refuses past the account pool (1,000/k) with Lambda.TooManyRequestsException, and a function past its reservation', async () => {
    const physics = parsePhysics('{"scale":100,"lambda":{"reserved":{"step":200}}}');
    const pool = new LambdaConcurrency(physics.lambda, physics.scale);
    expect(pool.stats()).toMatchObject({ accountConcurrency: 10, unreserved: 8 });
    const g = gate();
    const worker = pool.wrap(async () => g.p, 'worker');
    const step = pool.wrap(async () => g.p, 'step');
    const running = Array.from({ length: 8 }, () => worker(undefined));
    await expect(worker(undefined)).rejects.toMatchObject({ name: 'Lambda.TooManyRequestsException' });
    // The step's reservation is its own: the workers cannot take it, and it cannot pass it.
    const steps = [step(undefined), step(undefined)];
    await expect(step(undefined)).rejects.toMatchObject({ name: 'Lambda.TooManyRequestsException' });
    g.open();
    await Promise.all([...running, ...steps]);
    expect(pool.stats()).toMatchObject({
      peak: { worker: 8, step: 2 },
      throttled: { worker: 1, step: 1 },
      running: { worker: 0, step: 0 },
    });
  });

  it('refuses a reservation that leaves less than 100/k unreserved', () => {
    const physics = parsePhysics('{"scale":10,"lambda":{"reserved":{"worker":950}}}');
    expect(() => new LambdaConcurrency(physics.lambda, physics.scale)).toThrow(/unreserved/);
  });
});

describe('Step Functions StartExecution quota', () => {
  it('scales the quota pages’ buckets: Standard 1,300 and 300/s, Express 6,000 and 6,000/s, divided by k', () => {
    expect(parsePhysics('10').startExecution).toEqual({
      standard: { bucket: 130, perSecond: 30 },
      express: { bucket: 600, perSecond: 600 },
    });
  });

  it('admits a burst of one bucket, then refills at its rate, each kind apart', () => {
    const clock = { t: 0 };
    const budget = new StartExecutionBudget(parsePhysics('100').startExecution, () => clock.t);
    let standard = 0;
    while (budget.take('standard')) standard++;
    expect(standard).toBe(13);
    // Express has a bucket of its own: Standard's empty bucket does not refuse it.
    expect(budget.take('express')).toBe(true);
    clock.t = 1_000; // 3 tokens a second at k = 100
    expect([budget.take('standard'), budget.take('standard'), budget.take('standard')]).toEqual([
      true,
      true,
      true,
    ]);
    expect(budget.take('standard')).toBe(false);
    expect(budget.stats()).toMatchObject({
      admitted: { standard: 16, express: 1 },
      throttled: { standard: 2, express: 0 },
    });
  });

  it('fails a start with ThrottlingException after the SDK’s three tries, and never runs it', async () => {
    const budget = new StartExecutionBudget({
      standard: { bucket: 1, perSecond: 0.001 },
      express: { bucket: 1, perSecond: 0.001 },
    });
    let runs = 0;
    await expect(budget.startWithSdkRetries('express', () => ++runs)).resolves.toBe(1);
    await expect(budget.startWithSdkRetries('express', () => ++runs)).rejects.toMatchObject({
      name: 'ThrottlingException',
    });
    expect(runs).toBe(1);
    expect(budget.stats()).toMatchObject({
      throttled: { express: 3 },
      failed: { express: 1, standard: 0 },
    });
  });
});

describe('token buckets with a burst larger than a second', () => {
  it('start full, take whole tokens only, and refill up to their capacity', () => {
    const b = new TokenBucket(2, 0, 5);
    expect(Array.from({ length: 6 }, () => b.take(0))).toEqual([true, true, true, true, true, false]);
    expect(b.take(400)).toBe(false); // 0.8 of a token
    expect(b.take(500)).toBe(true);
    expect(b.available(60_000)).toBe(5);
  });
});
