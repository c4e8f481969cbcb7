import { CfnOutput, RemovalPolicy, Stack, type StackProps } from 'aws-cdk-lib';
import type { Construct } from 'constructs';
import { ControlPlaneApi } from './constructs/control-plane-api.ts';
import { HostTable } from './constructs/host-table.ts';

export interface TakoformHostStackProps extends StackProps {
  /** The origin clients use, e.g. a custom domain. @default the execute-api host (see ControlPlaneApi) */
  readonly publicOrigin?: string;
  /**
   * Prefix of every SQS queue this Host creates, so IAM can be scoped to `<prefix>*`.
   * At most 40 characters of `[a-z0-9-]`, leaving room for the Resource uid in SQS's 80.
   * @default derived from the stack name
   */
  readonly queueNamePrefix?: string;
  /** For stateful resources (table, log groups); DESTROY also lifts deletion protection. @default RETAIN */
  readonly removalPolicy?: RemovalPolicy;
}

const QUEUE_NAME_PREFIX = /^[a-z0-9-]{1,40}$/;

/** `TakoformHost` → `takoform-host`: lowercase kebab case, cut to 40 characters. */
export function deriveQueueNamePrefix(stackName: string): string {
  const kebab = stackName
    .replace(/([a-z0-9])([A-Z])/g, '$1-$2')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+/, '');
  return kebab.slice(0, 40).replace(/-+$/, '') || 'takoform';
}

/** The Takoform Host on AWS. Composes constructs only; resource details live in lib/constructs. */
export class TakoformHostStack extends Stack {
  readonly queueNamePrefix: string;
  readonly table: HostTable;
  readonly api: ControlPlaneApi;

  constructor(scope: Construct, id: string, props: TakoformHostStackProps = {}) {
    super(scope, id, props);
    this.queueNamePrefix = props.queueNamePrefix ?? deriveQueueNamePrefix(this.stackName);
    if (!QUEUE_NAME_PREFIX.test(this.queueNamePrefix)) {
      throw new Error(
        `queueNamePrefix must match ${QUEUE_NAME_PREFIX}, got ${JSON.stringify(this.queueNamePrefix)}`,
      );
    }
    const removalPolicy = props.removalPolicy ?? RemovalPolicy.RETAIN;

    this.table = new HostTable(this, 'Table', {
      removalPolicy,
      deletionProtection: removalPolicy !== RemovalPolicy.DESTROY,
    });
    this.api = new ControlPlaneApi(this, 'Api', { publicOrigin: props.publicOrigin, removalPolicy });
    this.table.bind(this.api.handler.fn);

    new CfnOutput(this, 'ApiUrl', { value: this.api.api.url, description: 'Invoke URL of the API stage' });
    new CfnOutput(this, 'TableName', { value: this.table.tableName, description: 'The Host DynamoDB table' });
  }
}
