import { randomBytes } from 'node:crypto';
import {
  ConditionalCheckFailedException,
  type DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
} from '@aws-sdk/client-dynamodb';
import { TABLE_KEYS } from '../../shared/table-schema.ts';

/**
 * The Host's own keys (list-cursor HMAC key, batch-credential key) on AWS: 32 random bytes per
 * name in the Host table (`SECRET#<name>`), made by whichever function needs one first. The table
 * is encrypted at rest and readable only by the Host's functions and its operators; worker
 * functions have no DynamoDB permission at all, so they can neither read nor forge credentials.
 */
export class DynamoHostSecrets {
  private readonly client: DynamoDBClient;
  private readonly table: string;

  constructor(client: DynamoDBClient, tableName: string) {
    this.client = client;
    this.table = tableName;
  }

  private key(name: string) {
    return { [TABLE_KEYS.pk]: { S: `SECRET#${name}` }, [TABLE_KEYS.sk]: { S: '_' } };
  }

  private async read(name: string): Promise<Buffer | undefined> {
    const out = await this.client.send(
      new GetItemCommand({ TableName: this.table, Key: this.key(name), ConsistentRead: true }),
    );
    const bytes = out.Item?.value?.B;
    return bytes && bytes.length >= 32 ? Buffer.from(bytes) : undefined;
  }

  /** The secret `name`; created once, conditionally, so concurrent cold starts agree on it. */
  async get(name: string): Promise<Buffer> {
    const existing = await this.read(name);
    if (existing) return existing;
    try {
      await this.client.send(
        new PutItemCommand({
          TableName: this.table,
          Item: {
            ...this.key(name),
            value: { B: randomBytes(32) },
            createdAt: { S: new Date().toISOString() },
          },
          ConditionExpression: 'attribute_not_exists(#pk)',
          ExpressionAttributeNames: { '#pk': TABLE_KEYS.pk },
        }),
      );
    } catch (err) {
      if (!(err instanceof ConditionalCheckFailedException)) throw err;
    }
    const made = await this.read(name);
    if (!made) throw new Error(`host secret ${name} could not be read back`);
    return made;
  }
}
