import { type AttributeValue, type DynamoDBClient, QueryCommand } from '@aws-sdk/client-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import type { OperationCensus } from '../../engine/executor-run.ts';
import { TABLE_KEYS } from '../../shared/table-schema.ts';

export type { OperationCensus };

/**
 * A read-only look at unfinished Operations through the `DUE` partition of gsi2 (the index holds
 * exactly the unfinished ones), for the executor's metrics and its decision to linger. Reads at
 * most `maxItems` items, so its cost stays bounded however large a backlog grows.
 */
export async function operationCensus(
  client: DynamoDBClient,
  tableName: string,
  opts: { now: number; stuckAfterMs: number; maxItems?: number },
): Promise<OperationCensus> {
  const { gsi2 } = TABLE_KEYS;
  const max = opts.maxItems ?? 1000;
  const out: OperationCensus = { unfinished: 0, reconciling: 0, stuckReconciling: 0, nextDueAt: undefined };
  let start: Record<string, AttributeValue> | undefined;
  do {
    const page = await client.send(
      new QueryCommand({
        TableName: tableName,
        IndexName: gsi2.name,
        KeyConditionExpression: '#pk = :due',
        ExpressionAttributeNames: { '#pk': gsi2.pk, '#gsk': gsi2.sk, '#status': 'status' },
        ExpressionAttributeValues: { ':due': { S: 'DUE' } },
        ProjectionExpression: '#status, createdAt, #gsk',
        Limit: Math.min(500, max - out.unfinished),
        ExclusiveStartKey: start,
      }),
    );
    for (const item of page.Items ?? []) {
      const v = unmarshall(item) as Record<string, unknown>;
      out.unfinished++;
      // The due key is `<15-digit epoch ms>#<id>`: the time the Operation is next due.
      const due = Number(String(v[gsi2.sk] ?? '0').slice(0, 15)) || 0;
      out.nextDueAt = out.nextDueAt === undefined ? due : Math.min(out.nextDueAt, due);
      if (v.status !== 'reconciling') continue;
      out.reconciling++;
      const created = typeof v.createdAt === 'string' ? Date.parse(v.createdAt) : Number.NaN;
      if (Number.isFinite(created) && opts.now - created > opts.stuckAfterMs) out.stuckReconciling++;
    }
    start = page.LastEvaluatedKey;
  } while (start && out.unfinished < max);
  return out;
}
