/** Queries that list: a principal's live Resources (gsi1, paged by uid) and a Resource's references. */
import { type AttributeValue, QueryCommand } from '@aws-sdk/client-dynamodb';
import { marshall, unmarshall } from '@aws-sdk/util-dynamodb';
import type { ResourceRecord } from '../../../engine/model.ts';
import type { ListQuery } from '../../../engine/ports.ts';
import { TABLE_KEYS } from '../../../shared/table-schema.ts';
import type { HostTable } from './host-table.ts';
import { keys, ownerPartition, toResource } from './items.ts';

const { pk: PK, sk: SK, gsi1 } = TABLE_KEYS;

export async function listResources(t: HostTable, q: ListQuery): Promise<ResourceRecord[]> {
  const out: ResourceRecord[] = [];
  let startKey: Record<string, AttributeValue> | undefined;
  const filters: string[] = [];
  const values: Record<string, unknown> = { ':o': ownerPartition(q.principal) };
  const names: Record<string, string> = { '#pk': gsi1.pk };
  for (const field of ['space', 'name', 'form'] as const) {
    const wanted = q[field];
    if (wanted !== undefined) {
      filters.push(`#${field} = :${field}`);
      names[`#${field}`] = field;
      values[`:${field}`] = wanted;
    }
  }
  let condition = '#pk = :o';
  if (q.afterUid !== undefined) {
    condition += ' AND #sk > :after';
    names['#sk'] = gsi1.sk;
    values[':after'] = q.afterUid;
  }
  do {
    const page = await t.client.send(
      new QueryCommand({
        TableName: t.table,
        IndexName: gsi1.name,
        KeyConditionExpression: condition,
        FilterExpression: filters.length ? filters.join(' AND ') : undefined,
        ExpressionAttributeNames: names,
        ExpressionAttributeValues: marshall(values),
        ExclusiveStartKey: startKey,
        Limit: Math.max(q.limit * 2, 25),
      }),
    );
    for (const item of page.Items ?? []) {
      const r = toResource(item);
      if (!r.deletedAt) out.push(r);
      if (out.length >= q.limit) return out;
    }
    startKey = page.LastEvaluatedKey;
  } while (startKey);
  return out;
}

/** The uids a Resource references: its edge items, in its own partition. */
export async function listReferences(t: HostTable, uid: string): Promise<string[]> {
  const out = await t.client.send(
    new QueryCommand({
      TableName: t.table,
      KeyConditionExpression: '#pk = :pk AND begins_with(#sk, :ref)',
      ExpressionAttributeNames: { '#pk': PK, '#sk': SK },
      ExpressionAttributeValues: marshall({ ':pk': keys.resource(uid)[PK], ':ref': 'REF#' }),
      ConsistentRead: true,
    }),
  );
  return (out.Items ?? []).map((item) => unmarshall(item).target as string);
}
