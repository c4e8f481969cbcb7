import {
  DeleteItemCommand,
  type DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
} from '@aws-sdk/client-dynamodb';
import { marshall, unmarshall } from '@aws-sdk/util-dynamodb';
import {
  type Access,
  type Authenticator,
  hashApiKey,
  type KeyRecord,
  matchKey,
  type Principal,
} from '../../engine/auth.ts';
import { TABLE_KEYS } from '../../shared/table-schema.ts';

const keyOf = (keyHash: string) => ({ [TABLE_KEYS.pk]: `KEY#${keyHash}`, [TABLE_KEYS.sk]: '_' });

/** API keys in the Host table, stored only as SHA-256 hashes (SEC-01); written by `npm run admin`. */
export class DynamoApiKeys implements Authenticator {
  private readonly client: DynamoDBClient;
  private readonly table: string;

  constructor(client: DynamoDBClient, tableName: string) {
    this.client = client;
    this.table = tableName;
  }

  async authenticate(token: string): Promise<Principal | undefined> {
    const out = await this.client.send(
      new GetItemCommand({
        TableName: this.table,
        Key: marshall(keyOf(hashApiKey(token))),
        ConsistentRead: true,
      }),
    );
    if (!out.Item) return matchKey(token, undefined);
    const v = unmarshall(out.Item);
    return matchKey(token, { keyHash: v.keyHash, principal: v.principal, spaces: v.spaces });
  }

  /** Stores a key's hash; the token itself is never written anywhere. */
  async put(
    token: string,
    principal: string,
    spaces: Record<string, Access>,
    label?: string,
  ): Promise<KeyRecord> {
    const record: KeyRecord = { keyHash: hashApiKey(token), principal, spaces };
    await this.client.send(
      new PutItemCommand({
        TableName: this.table,
        Item: marshall(
          { ...keyOf(record.keyHash), ...record, label, createdAt: new Date().toISOString() },
          { removeUndefinedValues: true },
        ),
        ConditionExpression: 'attribute_not_exists(#pk)',
        ExpressionAttributeNames: { '#pk': TABLE_KEYS.pk },
      }),
    );
    return record;
  }

  /** Removes a key by its token or by its hash (as `keys create` printed it). */
  async revoke(tokenOrHash: string): Promise<boolean> {
    const keyHash = /^[0-9a-f]{64}$/.test(tokenOrHash) ? tokenOrHash : hashApiKey(tokenOrHash);
    const out = await this.client.send(
      new DeleteItemCommand({
        TableName: this.table,
        Key: marshall(keyOf(keyHash)),
        ReturnValues: 'ALL_OLD',
      }),
    );
    return out.Attributes !== undefined;
  }
}
