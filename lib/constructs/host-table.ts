import { type CfnElement, RemovalPolicy, Stack, Validations } from 'aws-cdk-lib';
import { AttributeType, Billing, ProjectionType, TableV2 } from 'aws-cdk-lib/aws-dynamodb';
import type { Function as LambdaFunction } from 'aws-cdk-lib/aws-lambda';
import { Construct } from 'constructs';
import { TABLE_ENV_VAR, TABLE_KEYS } from '../../lambdas/shared/table-schema.ts';

export interface HostTableProps {
  /** Keep on for anything holding real data; turn off only for throwaway stacks. @default true */
  readonly deletionProtection?: boolean;
  /** @default RemovalPolicy.RETAIN */
  readonly removalPolicy?: RemovalPolicy;
}

/**
 * The Host's single DynamoDB table (Resources, Operations, idempotency keys, reservations, leases…).
 * Key and index names come from lambdas/shared/table-schema.ts, which the runtime code reads too.
 */
export class HostTable extends Construct {
  readonly table: TableV2;

  constructor(scope: Construct, id: string, props: HostTableProps = {}) {
    super(scope, id);
    const string = AttributeType.STRING;
    this.table = new TableV2(this, 'Table', {
      partitionKey: { name: TABLE_KEYS.pk, type: string },
      sortKey: { name: TABLE_KEYS.sk, type: string },
      billing: Billing.onDemand(),
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
      deletionProtection: props.deletionProtection ?? true,
      removalPolicy: props.removalPolicy ?? RemovalPolicy.RETAIN,
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
    this.table.grants.readWriteData(fn);
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
