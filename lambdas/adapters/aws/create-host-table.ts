import {
  CreateTableCommand,
  type DynamoDBClient,
  ResourceInUseException,
  UpdateTimeToLiveCommand,
  waitUntilTableExists,
} from '@aws-sdk/client-dynamodb';
import { TABLE_KEYS } from '../../shared/table-schema.ts';

/**
 * Creates the Host table with the schema the CDK construct deploys (lib/constructs/host-table.ts),
 * for the local Host and the tests. Does nothing when the table exists.
 */
export async function createHostTable(client: DynamoDBClient, tableName: string): Promise<void> {
  const { pk, sk, gsi1, gsi2, ttl } = TABLE_KEYS;
  const index = (g: typeof gsi1 | typeof gsi2) => ({
    IndexName: g.name,
    KeySchema: [
      { AttributeName: g.pk, KeyType: 'HASH' as const },
      { AttributeName: g.sk, KeyType: 'RANGE' as const },
    ],
    Projection: { ProjectionType: 'ALL' as const },
  });
  try {
    await client.send(
      new CreateTableCommand({
        TableName: tableName,
        BillingMode: 'PAY_PER_REQUEST',
        KeySchema: [
          { AttributeName: pk, KeyType: 'HASH' },
          { AttributeName: sk, KeyType: 'RANGE' },
        ],
        AttributeDefinitions: [pk, sk, gsi1.pk, gsi1.sk, gsi2.pk, gsi2.sk].map((name) => ({
          AttributeName: name,
          AttributeType: 'S' as const,
        })),
        GlobalSecondaryIndexes: [index(gsi1), index(gsi2)],
      }),
    );
  } catch (err) {
    if (err instanceof ResourceInUseException) return;
    throw err;
  }
  await waitUntilTableExists({ client, maxWaitTime: 60 }, { TableName: tableName });
  await client.send(
    new UpdateTimeToLiveCommand({
      TableName: tableName,
      TimeToLiveSpecification: { AttributeName: ttl, Enabled: true },
    }),
  );
}
