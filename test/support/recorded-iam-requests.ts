/**
 * Recorded AWS SDK calls (lambdas/adapters/aws/call-recorder.ts) as the IAM requests AWS would
 * authorize on the deployed stack: action, resource ARN and the context keys conditions read.
 * Local names (the stand-ins' table, the test's queue prefix, local function and state machine
 * names) are mapped to the names the synthesized stack gives them; an unknown name throws, so a
 * call on something the mapping does not know fails the test instead of passing unchecked.
 *
 * Where one API call needs several permissions, each is a request: a transaction needs the item
 * action on every item (there is no IAM action for TransactWriteItems), a batch of SQS entries the
 * single action, a CreateQueue with tags also sqs:TagQueue.
 */
import type { RecordedCall } from '../../lambdas/adapters/aws/call-recorder.ts';

export interface IamRequest {
  readonly action: string;
  readonly resource: string;
  readonly context: Record<string, string | string[]>;
}

export interface DeployedNames {
  readonly account: string;
  readonly region: string;
  /** The local table name and the deployed table's ARN. */
  readonly table: { readonly local: string; readonly arn: string };
  /** Queue names: `<local><rest>` locally, `<deployed><rest>` on AWS. */
  readonly queuePrefix: { readonly local: string; readonly deployed: string };
  /** Local function name or ARN → deployed function ARN. */
  readonly functions: Readonly<Record<string, string>>;
  /** Local state machine ARN → deployed ARN. */
  readonly stateMachines: Readonly<Record<string, string>>;
}

type Input = Record<string, unknown>;

const TRANSACT_WRITE_ACTIONS: Record<string, string> = {
  Put: 'dynamodb:PutItem',
  Update: 'dynamodb:UpdateItem',
  Delete: 'dynamodb:DeleteItem',
  ConditionCheck: 'dynamodb:ConditionCheckItem',
};

/** SQS batch operations are authorized as their single action. */
const SQS_BATCH_ACTIONS: Record<string, string> = {
  SendMessageBatch: 'SendMessage',
  DeleteMessageBatch: 'DeleteMessage',
  ChangeMessageVisibilityBatch: 'ChangeMessageVisibility',
};

export class IamRequestMapper {
  /** Tags per deployed queue name, learnt from the recorded CreateQueue and TagQueue calls. */
  private readonly tags = new Map<string, Record<string, string>>();

  private readonly names: DeployedNames;

  constructor(names: DeployedNames) {
    this.names = names;
  }

  /** Learns the tags a call gives a queue (call this for every recorded call, in order). */
  observe(call: RecordedCall): void {
    if (call.service !== 'sqs') return;
    const i = call.input as Input;
    if (call.operation === 'CreateQueue' && i.tags)
      this.addTags(this.queueName(String(i.QueueName)), i.tags as Record<string, string>);
    if (call.operation === 'TagQueue')
      this.addTags(this.queueNameOfUrl(i.QueueUrl), i.Tags as Record<string, string>);
  }

  requests(call: RecordedCall): IamRequest[] {
    const i = call.input as Input;
    switch (call.service) {
      case 'dynamodb':
        return this.dynamodb(call.operation, i);
      case 'sqs':
        return this.sqs(call.operation, i);
      case 'lambda':
        if (call.operation !== 'Invoke') break;
        return [
          {
            action: 'lambda:InvokeFunction',
            resource: this.lookup('function', this.names.functions, i.FunctionName),
            context: {},
          },
        ];
      case 'states':
        if (call.operation !== 'StartExecution') break;
        return [
          {
            action: 'states:StartExecution',
            resource: this.lookup('state machine', this.names.stateMachines, i.stateMachineArn),
            context: {},
          },
        ];
      case 'cloudwatch':
        // CloudWatch metric reads have no resource-level permissions.
        return [{ action: `cloudwatch:${call.operation}`, resource: '*', context: {} }];
    }
    throw new Error(`no IAM mapping for ${call.service}:${call.operation}`);
  }

  private dynamodb(op: string, i: Input): IamRequest[] {
    const req = (action: string, table: unknown, index?: unknown) => ({
      action,
      resource: `${this.tableArn(table)}${index ? `/index/${String(index)}` : ''}`,
      context: {},
    });
    if (op === 'TransactWriteItems')
      return (i.TransactItems as Record<string, { TableName: string }>[]).map((item) => {
        const [kind, body] = Object.entries(item)[0]!;
        const action = TRANSACT_WRITE_ACTIONS[kind];
        if (!action) throw new Error(`unknown transaction item ${kind}`);
        return req(action, body.TableName);
      });
    if (op === 'TransactGetItems')
      return (i.TransactItems as { Get: { TableName: string } }[]).map((item) =>
        req('dynamodb:GetItem', item.Get.TableName),
      );
    if (op === 'BatchWriteItem' || op === 'BatchGetItem')
      return Object.keys(i.RequestItems as Input).map((table) => req(`dynamodb:${op}`, table));
    return [req(`dynamodb:${op}`, i.TableName, i.IndexName)];
  }

  private sqs(op: string, i: Input): IamRequest[] {
    const name =
      i.QueueUrl !== undefined ? this.queueNameOfUrl(i.QueueUrl) : this.queueName(String(i.QueueName));
    const resource = `arn:aws:sqs:${this.names.region}:${this.names.account}:${name}`;
    const action = `sqs:${SQS_BATCH_ACTIONS[op] ?? op}`;
    if (op === 'CreateQueue') {
      const tags = (i.tags ?? {}) as Record<string, string>;
      const context = {
        ...Object.fromEntries(Object.entries(tags).map(([k, v]) => [`aws:RequestTag/${k}`, v])),
        ...(Object.keys(tags).length > 0 ? { 'aws:TagKeys': Object.keys(tags) } : {}),
      };
      // Tagging at creation needs sqs:TagQueue as well.
      return [
        { action, resource, context },
        ...(Object.keys(tags).length > 0 ? [{ action: 'sqs:TagQueue', resource, context }] : []),
      ];
    }
    const tags = this.tags.get(name) ?? {};
    const context = Object.fromEntries(Object.entries(tags).map(([k, v]) => [`aws:ResourceTag/${k}`, v]));
    return [{ action, resource, context }];
  }

  private addTags(queue: string, tags: Record<string, string> | undefined): void {
    this.tags.set(queue, { ...this.tags.get(queue), ...tags });
  }

  private tableArn(table: unknown): string {
    if (table !== this.names.table.local) throw new Error(`a call on an unknown table ${String(table)}`);
    return this.names.table.arn;
  }

  private queueNameOfUrl(url: unknown): string {
    return this.queueName(decodeURIComponent(new URL(String(url)).pathname.split('/').at(-1) ?? ''));
  }

  /** The deployed name of a local queue name. */
  private queueName(local: string): string {
    const { local: prefix, deployed } = this.names.queuePrefix;
    if (!local.startsWith(prefix)) throw new Error(`a call on a queue outside the Host's prefix: ${local}`);
    return `${deployed}${local.slice(prefix.length)}`;
  }

  private lookup(what: string, map: Readonly<Record<string, string>>, local: unknown): string {
    const deployed = map[String(local)];
    if (!deployed) throw new Error(`a call on an unknown ${what} ${String(local)}`);
    return deployed;
  }
}
