import { type CfnElement, RemovalPolicy, Stack, Validations } from 'aws-cdk-lib';
import { AttributeType, Billing, ProjectionType, TableEncryptionV2, TableV2 } from 'aws-cdk-lib/aws-dynamodb';
import * as iam from 'aws-cdk-lib/aws-iam';
import type { IKey } from 'aws-cdk-lib/aws-kms';
import type { Function as LambdaFunction } from 'aws-cdk-lib/aws-lambda';
import { Construct } from 'constructs';
import { TABLE_ENV_VAR, TABLE_KEYS } from '../../lambdas/shared/table-schema.ts';
import { grantKeyUse } from './key-grants.ts';

/**
 * What a PutItem/DeleteItem on a table under a customer-managed key needs of that key: CDK's own
 * write grant without its wildcards (for roles whose findings are not acknowledged).
 */
export const TABLE_KEY_WRITE_ACTIONS = [
  'kms:Decrypt',
  'kms:DescribeKey',
  'kms:Encrypt',
  'kms:GenerateDataKey',
];

/** What `TableV2.grants.readWriteData` allows on the table and its indexes. */
const TABLE_DATA_ACTIONS = [
  'dynamodb:BatchGetItem',
  'dynamodb:BatchWriteItem',
  'dynamodb:ConditionCheckItem',
  'dynamodb:DeleteItem',
  'dynamodb:DescribeTable',
  'dynamodb:GetItem',
  'dynamodb:GetRecords',
  'dynamodb:GetShardIterator',
  'dynamodb:PutItem',
  'dynamodb:Query',
  'dynamodb:Scan',
  'dynamodb:UpdateItem',
];

export interface HostTableProps {
  /** Keep on for anything holding real data; turn off only for throwaway stacks. @default true */
  readonly deletionProtection?: boolean;
  /** @default RemovalPolicy.RETAIN */
  readonly removalPolicy?: RemovalPolicy;
  /** A customer-managed KMS key. @default an AWS-owned key (DynamoDB's default encryption) */
  readonly encryptionKey?: IKey;
}

/**
 * The Host's single DynamoDB table (Resources, Operations, idempotency keys, reservations, leases…).
 * Key and index names come from lambdas/shared/table-schema.ts, which the runtime code reads too.
 */
export class HostTable extends Construct {
  readonly table: TableV2;
  /** The customer-managed key, when one was given. */
  readonly encryptionKey?: IKey;

  constructor(scope: Construct, id: string, props: HostTableProps = {}) {
    super(scope, id);
    this.encryptionKey = props.encryptionKey;
    const string = AttributeType.STRING;
    this.table = new TableV2(this, 'Table', {
      partitionKey: { name: TABLE_KEYS.pk, type: string },
      sortKey: { name: TABLE_KEYS.sk, type: string },
      billing: Billing.onDemand(),
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
      deletionProtection: props.deletionProtection ?? true,
      removalPolicy: props.removalPolicy ?? RemovalPolicy.RETAIN,
      ...(props.encryptionKey
        ? { encryption: TableEncryptionV2.customerManagedKey(props.encryptionKey) }
        : {}),
      timeToLiveAttribute: TABLE_KEYS.ttl,
      globalSecondaryIndexes: [TABLE_KEYS.gsi1, TABLE_KEYS.gsi2].map((gsi) => ({
        indexName: gsi.name,
        partitionKey: { name: gsi.pk, type: string },
        sortKey: { name: gsi.sk, type: string },
        projectionType: ProjectionType.ALL,
      })),
    });
  }

  get tableName(): string {
    return this.table.tableName;
  }

  /**
   * Lets `fn` read and write items (table and its indexes only) and tells it the table name.
   * Grant and env var are set together so they cannot drift apart.
   */
  bind(fn: LambdaFunction): void {
    if (this.encryptionKey) {
      // CDK's grant on a table under a customer-managed key allows the key actions on every key
      // ("*"); this one names the key, and the same table and index actions as readWriteData.
      const arn = this.table.tableArn;
      iam.Grant.addToPrincipal({
        grantee: fn,
        actions: TABLE_DATA_ACTIONS,
        resourceArns: [arn, `${arn}/index/*`],
      });
      grantKeyUse(fn, this.encryptionKey, TABLE_KEY_WRITE_ACTIONS);
    } else {
      this.table.grants.readWriteData(fn);
    }
    fn.addEnvironment(TABLE_ENV_VAR, this.table.tableName);
    if (fn.role) {
      // Queries on a GSI need `<table>/index/<name>`; the grant writes `index/*` for all of them.
      const tableId = Stack.of(this).getLogicalId(this.table.node.defaultChild as CfnElement);
      Validations.of(fn.role).acknowledge({
        id: `AwsSolutions-IAM5[Resource::<${tableId}.Arn>/index/*]`,
        reason: "The wildcard covers only this table's own GSIs, which the function queries.",
      });
    }
  }
}
