import { GetItemCommand, ScanCommand } from '@aws-sdk/client-dynamodb';
import { GetQueueUrlCommand, ListQueuesCommand } from '@aws-sdk/client-sqs';
import { marshall, unmarshall } from '@aws-sdk/util-dynamodb';
import { expect } from 'vitest';
import { attachmentKey } from '../../../lambdas/adapters/aws/dynamodb-attachments.ts';
import { DynamoDeliveryStore } from '../../../lambdas/adapters/aws/dynamodb-delivery-store.ts';
import { keys } from '../../../lambdas/adapters/aws/dynamodb-host-store.ts';
import { MAX_SLOTS_PER_SHARD } from '../../../lambdas/adapters/aws/slot-groups.ts';
import {
  consumerClaimKey,
  deadLetterGraphKey,
} from '../../../lambdas/forms/queue-consumer/queue-consumer-form.ts';
import { FORMS, type ParsedResponse, type TestHost, type TestPrincipal } from '../../support/host-harness.ts';

/**
 * Shared helpers for the QueueConsumer 0.3.0 integration files: Resource set-up through the HTTP
 * core, and direct reads of the Host table and the SQS stand-in to prove what did (not) happen.
 */

export const SPACE = 'team';

export interface Ref {
  resourceUid: string;
}

/** A valid QueueConsumer spec with the canonical numbers of the Form's example. */
export function consumerSpec(queue: string, worker: string, extra: Record<string, unknown> = {}) {
  return {
    queue: { resourceUid: queue },
    worker: { resourceUid: worker },
    maxBatchSize: 10,
    maxBatchTimeoutSeconds: 5,
    maxConcurrency: 4,
    maxRetries: 3,
    retryDelaySeconds: 30,
    ...extra,
  };
}

/** Problem Details with this status and code, never an Operation (host-api-v2 §7.4, §13). */
export function expectProblem(res: ParsedResponse, status: number, code: string): void {
  expect({ status: res.status, code: res.body?.code }).toEqual({ status, code });
  expect(res.headers['content-type']?.split(';')[0]).toBe('application/problem+json');
  expect(res.body.type).toBe('about:blank');
  expect(res.body.status).toBe(status);
  expect(res.body.id).toBeUndefined();
  expect(res.headers.location).toBeUndefined();
  // Details speak to users: never a requirement id such as "(QC-05)" they cannot look up.
  expect(String(res.body.detail ?? '')).not.toMatch(/\b[A-Z]{2,3}-\d{2}\b/);
}

export async function createQueue(host: TestHost, name: string, as?: TestPrincipal, space = SPACE) {
  const res = await host.create(
    { form: FORMS.queue, space, name, spec: { messageRetentionSeconds: 3600 } },
    as,
  );
  expect(res.status, JSON.stringify(res.body)).toBe(202);
  return res.body.resourceUid as string;
}

/** A ModuleWorker Resource plus (unless `handlers` is null) fake code declaring those handlers. */
export async function createWorker(
  host: TestHost,
  name: string,
  handlers: ('fetch' | 'scheduled' | 'queue')[] | null = ['queue'],
  as?: TestPrincipal,
  space = SPACE,
) {
  if (handlers) host.workers.set(space, name, handlers);
  const res = await host.create({ form: FORMS.moduleWorker, space, name, spec: {} }, as);
  expect(res.status, JSON.stringify(res.body)).toBe(202);
  return res.body.resourceUid as string;
}

export function createConsumer(
  host: TestHost,
  name: string,
  spec: unknown,
  opts: { as?: TestPrincipal; key?: string; space?: string } = {},
) {
  return host.create({ form: FORMS.consumer, space: opts.space ?? SPACE, name, spec }, opts.as, opts.key);
}

/** Creates a consumer that must be accepted; returns its uid. */
export async function acceptedConsumer(host: TestHost, name: string, spec: unknown) {
  const res = await createConsumer(host, name, spec);
  expect(res.status, JSON.stringify(res.body)).toBe(202);
  return res.body.resourceUid as string;
}

export function getResource(host: TestHost, uid: string, as?: TestPrincipal) {
  return host.request({ path: `/resources/${uid}`, as });
}

export function getOperation(host: TestHost, id: string) {
  return host.request({ path: `/operations/${id}` });
}

export function update(host: TestHost, uid: string, generation: number, spec: unknown, key = host.newKey()) {
  return host.request({
    method: 'PUT',
    path: `/resources/${uid}`,
    body: { spec },
    headers: { 'idempotency-key': key, 'takoform-expected-generation': String(generation) },
  });
}

export function remove(host: TestHost, uid: string, generation: number, key = host.newKey()) {
  return host.request({
    method: 'DELETE',
    path: `/resources/${uid}`,
    headers: { 'idempotency-key': key, 'takoform-expected-generation': String(generation) },
  });
}

/** Deletes a Resource at its current generation and runs the executor until the delete succeeded. */
export async function removeAndSettle(host: TestHost, uid: string) {
  const current = await getResource(host, uid);
  expect(current.status).toBe(200);
  const del = await remove(host, uid, current.body.generation);
  expect(del.status, JSON.stringify(del.body)).toBe(202);
  await host.settle();
  expect((await getOperation(host, del.body.id)).body).toMatchObject({ status: 'succeeded' });
}

async function getItem(host: TestHost, key: Record<string, string>) {
  const out = await host.dynamodb.send(
    new GetItemCommand({ TableName: host.tableName, Key: marshall(key), ConsistentRead: true }),
  );
  return out.Item ? unmarshall(out.Item) : undefined;
}

/** The `CLAIM#consumer-of:<queueUid>` item: who consumes that queue, and its dead-letter edge. */
export const claimItem = (host: TestHost, queueUid: string) =>
  getItem(host, keys.claim(consumerClaimKey(queueUid)));

/** The `ATTACH#<consumerUid>` item the dispatcher acts on. */
export const attachmentItem = (host: TestHost, consumerUid: string) =>
  getItem(host, attachmentKey(consumerUid));

export const resourceItem = (host: TestHost, uid: string) => getItem(host, keys.resource(uid));

export const nameItem = (host: TestHost, name: string, space = SPACE) =>
  getItem(host, keys.name(space, name));

export async function graphVersion(host: TestHost, space = SPACE): Promise<number> {
  const item = await getItem(host, keys.version(deadLetterGraphKey(space)));
  return (item?.version as number | undefined) ?? 0;
}

/** Every item of the Host table, sorted: the whole durable state, for before/after comparison. */
export async function tableSnapshot(host: TestHost): Promise<string[]> {
  const out: string[] = [];
  let start: Record<string, import('@aws-sdk/client-dynamodb').AttributeValue> | undefined;
  do {
    const page = await host.dynamodb.send(
      new ScanCommand({ TableName: host.tableName, ExclusiveStartKey: start, ConsistentRead: true }),
    );
    for (const item of page.Items ?? []) out.push(JSON.stringify(unmarshall(item)));
    start = page.LastEvaluatedKey;
  } while (start);
  return out.sort();
}

/** Keys (pk) of all items whose partition key starts with `prefix`. */
export async function partitionsWithPrefix(host: TestHost, prefix: string): Promise<string[]> {
  return (await tableSnapshot(host))
    .map((row) => JSON.parse(row).pk as string)
    .filter((pk) => pk.startsWith(prefix));
}

/** The SQS queues this test Host owns (its name prefix), sorted. */
export async function sqsQueues(host: TestHost): Promise<string[]> {
  const urls: string[] = [];
  let token: string | undefined;
  do {
    const out = await host.sqs.send(
      new ListQueuesCommand({ QueueNamePrefix: host.queueNamePrefix, NextToken: token, MaxResults: 1000 }),
    );
    urls.push(...(out.QueueUrls ?? []));
    token = out.NextToken;
  } while (token);
  return urls.sort();
}

export async function sqsUrl(host: TestHost, queueUid: string): Promise<string | undefined> {
  return host.sqs
    .send(new GetQueueUrlCommand({ QueueName: `${host.queueNamePrefix}${queueUid}` }))
    .then((o) => o.QueueUrl)
    .catch(() => undefined);
}

/**
 * A batch of a consumer in flight, recorded exactly as the dispatcher records one: a concurrency
 * slot with its deadline, registered as holding a batch (what the Host's in-flight check reads;
 * a slot not yet registered is an idle lane, which a stop boundary revokes instead).
 */
export async function startBatch(host: TestHost, consumerUid: string, batchId: string, deadline: number) {
  const store = firstShardStore(host);
  expect(
    (await store.takeSlot(consumerUid, batchId, deadline, { max: FIRST_SHARD, generation: 1 })).batchId,
  ).toBe(batchId);
  expect(await store.markRegistered(consumerUid, batchId)).toBe(true);
}

/** An idle lane: a slot taken, no batch registered in it yet. */
export async function idleLane(host: TestHost, consumerUid: string, batchId: string, deadline: number) {
  const store = firstShardStore(host);
  expect(
    (await store.takeSlot(consumerUid, batchId, deadline, { max: FIRST_SHARD, generation: 1 })).batchId,
  ).toBe(batchId);
}

/**
 * A bound that keeps every slot in the consumer's first shard, where a batch id stays as given:
 * the helpers write with the largest shard the layout allows (the Host reads any).
 */
const FIRST_SHARD = MAX_SLOTS_PER_SHARD;
const firstShardStore = (host: TestHost) =>
  new DynamoDeliveryStore(host.dynamodb, host.tableName, { slotsPerShard: FIRST_SHARD });

/** The batch ended (settled or made redeliverable): its slot is released. */
export async function endBatch(host: TestHost, consumerUid: string, batchId: string) {
  await new DynamoDeliveryStore(host.dynamodb, host.tableName).releaseSlot(consumerUid, batchId);
}

/**
 * What a refused request must leave untouched: the whole table (no Resource, name reservation,
 * idempotency mapping, Operation, claim, reference, attachment or graph version), the SQS queues,
 * and the accepted-Operation hook. `check` runs the before/after comparison plus explicit reads.
 */
export async function sideEffectProbe(
  host: TestHost,
  watch: { name: string; key: string; queues: string[]; as?: TestPrincipal; space?: string },
) {
  const space = watch.space ?? SPACE;
  const principal = watch.as?.id ?? 'alice';
  const table = await tableSnapshot(host);
  const queues = await sqsQueues(host);
  const claims = await Promise.all(watch.queues.map((q) => claimItem(host, q)));
  const attachments = await partitionsWithPrefix(host, 'ATTACH#');
  const accepted = host.accepted.length;
  return async function check() {
    const list = await host.request({
      path: '/resources',
      query: `space=${space}&name=${watch.name}`,
      as: watch.as,
    });
    expect(list.body.items).toEqual([]);
    expect(await nameItem(host, watch.name, space)).toBeUndefined();
    expect(await getItem(host, keys.idempotency(principal, watch.key))).toBeUndefined();
    expect(await Promise.all(watch.queues.map((q) => claimItem(host, q)))).toEqual(claims);
    expect(await partitionsWithPrefix(host, 'ATTACH#')).toEqual(attachments);
    expect(host.accepted.length).toBe(accepted);
    expect(await tableSnapshot(host)).toEqual(table);
    expect(await sqsQueues(host)).toEqual(queues);
  };
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
