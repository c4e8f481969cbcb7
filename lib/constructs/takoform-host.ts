import { ArnFormat, type Duration, RemovalPolicy, Stack, Token, Validations } from 'aws-cdk-lib';
import { BasePathMapping, DomainName, EndpointType, SecurityPolicy } from 'aws-cdk-lib/aws-apigateway';
import type { ICertificate } from 'aws-cdk-lib/aws-certificatemanager';
import * as iam from 'aws-cdk-lib/aws-iam';
import { RetentionDays } from 'aws-cdk-lib/aws-logs';
import type { ITopic } from 'aws-cdk-lib/aws-sns';
import { Construct } from 'constructs';
import { commitKey } from '../../lambdas/adapters/aws/dynamodb-commit-store.ts';
import { parsePublicOrigin } from '../../lambdas/http/origin.ts';
import { TABLE_KEYS } from '../../lambdas/shared/table-schema.ts';
import { ControlPlaneApi } from './control-plane-api.ts';
import { DeliveryPipeline } from './delivery-pipeline.ts';
import { type AlarmThresholds, HostObservability } from './host-observability.ts';
import { HostTable } from './host-table.ts';
import type { WorkerHostBinding } from './module-worker-function.ts';
import { nagResource } from './nag.ts';

export interface TakoformHostProps {
  /**
   * The origin clients use (`https://host[:port]`). With `domainName` it defaults to
   * `https://<domainName>`. @default the execute-api host, which is not conformant (stage prefix)
   */
  readonly publicOrigin?: string;
  /** A custom domain for the API, mapped at the root (discovery must sit at the origin root). @default none */
  readonly domainName?: string;
  /** The ACM certificate of `domainName` (same region, REGIONAL endpoint). Required with `domainName`. */
  readonly certificate?: ICertificate;
  /**
   * The Host's name: stem of every SQS queue name (`<stem>_<uid>`), of worker function names
   * (`<stem>_wkr-…`) and of the dispatcher (`<stem>_dispatcher`), so IAM can be scoped to
   * `<stem>_*`; it also names the REST API, the alarms and the dashboard, and is the `host`
   * dimension of the Host's metrics. 1..40 characters of `[a-z0-9-]`, not ending in `-`. It never
   * contains `_`, so no other Host's prefix extends this one's: give every Host in an account and
   * region its own. @default derived from the stack name
   */
  readonly queueNamePrefix?: string;
  /** For the table and the log groups; DESTROY also lifts the table's deletion protection. @default RETAIN */
  readonly removalPolicy?: RemovalPolicy;
  /** @default RetentionDays.ONE_MONTH */
  readonly logRetention?: RetentionDays;
  /** Receives alarm and OK notifications. @default alarms without actions */
  readonly alarmTopic?: ITopic;
  /** @default see AlarmThresholds */
  readonly alarmThresholds?: AlarmThresholds;
  /** Stage-wide API throttling. @default { rateLimit: 100, burstLimit: 200 } */
  readonly throttling?: { readonly rateLimit?: number; readonly burstLimit?: number };
  /** Bound on one worker invocation, 1..14 minutes. @default 14 minutes */
  readonly workerTimeout?: Duration;
  /** How long an idle lane long-polls before resting, 0..20 s. @default 20 */
  readonly idleWaitSeconds?: number;
}

const QUEUE_NAME_PREFIX = /^[a-z0-9](?:[a-z0-9-]{0,38}[a-z0-9])?$/;
/**
 * Ends every name prefix of a Host (`<stem>_`). Stems cannot contain it, so the prefix of one Host
 * is never a prefix of another's (`takoform-host_` vs `takoform-host-staging_`).
 */
export const HOST_NAME_DELIMITER = '_';

/** `TakoformHost` → `takoform-host`: lowercase kebab case, cut to 40 characters. */
export function deriveQueueNamePrefix(stackName: string): string {
  const kebab = stackName
    .replace(/([a-z0-9])([A-Z])/g, '$1-$2')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+/, '');
  return kebab.slice(0, 40).replace(/-+$/, '') || 'takoform';
}

/** Every problem with the props, so one synth shows them all. */
export function validateTakoformHostProps(props: TakoformHostProps, queueNamePrefix: string): string[] {
  const errors: string[] = [];
  if (!QUEUE_NAME_PREFIX.test(queueNamePrefix)) {
    errors.push(
      `queueNamePrefix must be 1..40 characters of [a-z0-9-] without a leading or trailing '-', got ${JSON.stringify(queueNamePrefix)}`,
    );
  }
  if ((props.domainName === undefined) !== (props.certificate === undefined)) {
    errors.push('domainName and certificate go together: give both or neither');
  }
  if (props.domainName !== undefined && !Token.isUnresolved(props.domainName)) {
    if (!/^(?=.{1,253}$)(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$/i.test(props.domainName)) {
      errors.push(`domainName ${JSON.stringify(props.domainName)} is not a DNS name`);
    }
  }
  if (props.publicOrigin !== undefined && !Token.isUnresolved(props.publicOrigin)) {
    try {
      const origin = parsePublicOrigin(props.publicOrigin);
      if (
        props.domainName &&
        !Token.isUnresolved(props.domainName) &&
        origin !== `https://${props.domainName.toLowerCase()}`
      ) {
        errors.push(`publicOrigin ${origin} does not match domainName ${props.domainName}`);
      }
    } catch (err) {
      errors.push((err as Error).message);
    }
  }
  const { rateLimit, burstLimit } = props.throttling ?? {};
  if (rateLimit !== undefined && !(Number.isFinite(rateLimit) && rateLimit > 0)) {
    errors.push('throttling.rateLimit must be a positive number');
  }
  if (burstLimit !== undefined && !(Number.isInteger(burstLimit) && burstLimit > 0)) {
    errors.push('throttling.burstLimit must be a positive integer');
  }
  const timeout = props.workerTimeout?.toSeconds();
  if (timeout !== undefined && (timeout < 60 || timeout > 840)) {
    errors.push('workerTimeout must be 1..14 minutes (a batch must fit in one Lambda invocation)');
  }
  const idle = props.idleWaitSeconds;
  if (idle !== undefined && !(Number.isInteger(idle) && idle >= 0 && idle <= 20)) {
    errors.push('idleWaitSeconds must be an integer in 0..20');
  }
  return errors;
}

/**
 * The whole Takoform Host as one construct, for embedding in any CDK app: the Host table, the
 * Host API v2 (REST API + Lambda, optional custom domain mapped at the root), delivery (the
 * dispatcher state machine and its functions, executor and supervisor schedules) and the
 * operator's dashboard and alarms. Workers join with `ModuleWorkerFunction` and `workerBinding`.
 */
export class TakoformHost extends Construct {
  /** The Host's name: the queue name stem (without the trailing `_`). */
  readonly queueNamePrefix: string;
  readonly table: HostTable;
  readonly api: ControlPlaneApi;
  readonly delivery: DeliveryPipeline;
  readonly observability: HostObservability;
  readonly domain: DomainName | undefined;
  /** The origin the Host advertises. */
  readonly publicOrigin: string;
  private readonly domainName: string | undefined;
  private readonly logRetention: RetentionDays;
  private readonly removalPolicy: RemovalPolicy;

  constructor(scope: Construct, id: string, props: TakoformHostProps = {}) {
    super(scope, id);
    this.queueNamePrefix = props.queueNamePrefix ?? deriveQueueNamePrefix(Stack.of(this).stackName);
    const errors = validateTakoformHostProps(props, this.queueNamePrefix);
    if (errors.length > 0) throw new Error(`TakoformHost ${this.node.path}: ${errors.join('; ')}`);

    const removalPolicy = props.removalPolicy ?? RemovalPolicy.RETAIN;
    const logRetention = props.logRetention ?? RetentionDays.ONE_MONTH;
    const origin =
      props.publicOrigin ?? (props.domainName ? `https://${props.domainName.toLowerCase()}` : undefined);

    this.table = new HostTable(this, 'Table', {
      removalPolicy,
      deletionProtection: removalPolicy !== RemovalPolicy.DESTROY,
    });
    const prefix = `${this.queueNamePrefix}${HOST_NAME_DELIMITER}`;
    this.api = new ControlPlaneApi(this, 'Api', {
      restApiName: `${prefix}api`,
      publicOrigin: origin,
      removalPolicy,
      logRetention,
      throttlingRateLimit: props.throttling?.rateLimit,
      throttlingBurstLimit: props.throttling?.burstLimit,
    });
    this.publicOrigin = this.api.publicOrigin;
    this.table.bind(this.api.handler.fn);

    if (props.domainName && props.certificate) {
      this.domain = new DomainName(this, 'Domain', {
        domainName: props.domainName,
        certificate: props.certificate,
        endpointType: EndpointType.REGIONAL,
        securityPolicy: SecurityPolicy.TLS_1_2,
      });
      // The root mapping: discovery lives at https://<domain>/.well-known/takoform/v2.
      new BasePathMapping(this, 'RootMapping', { domainName: this.domain, restApi: this.api.api });
    }

    this.delivery = new DeliveryPipeline(this, 'Delivery', {
      table: this.table,
      hostName: this.queueNamePrefix,
      queueNamePrefix: prefix,
      publicOrigin: this.publicOrigin,
      workerTimeout: props.workerTimeout,
      idleWaitSeconds: props.idleWaitSeconds,
      logRetention,
      removalPolicy,
    });
    this.delivery.bindApi(this.api.handler);

    this.observability = new HostObservability(this, 'Observability', {
      api: this.api.api,
      hostFunctions: {
        api: this.api.handler.fn,
        step: this.delivery.stepFunction.fn,
        batchHost: this.delivery.batchHostFunction.fn,
        executor: this.delivery.executorFunction.fn,
        supervisor: this.delivery.supervisorFunction.fn,
      },
      stateMachine: this.delivery.stateMachine,
      hostName: this.queueNamePrefix,
      queueNamePrefix: prefix,
      alarmTopic: props.alarmTopic,
      thresholds: props.alarmThresholds,
    });
    this.logRetention = logRetention;
    this.removalPolicy = removalPolicy;
    this.domainName = props.domainName?.toLowerCase();
  }

  /** What a ModuleWorkerFunction needs to join this Host. */
  get workerBinding(): WorkerHostBinding {
    return {
      tableArn: this.table.table.tableArn,
      tableName: this.table.tableName,
      batchHostFunction: this.delivery.batchHostFunction.fn,
      queueArnPattern: this.delivery.queueArnPattern,
      queueNamePrefix: this.delivery.queueNamePrefix,
      workerFunctionNamePrefix: this.delivery.workerFunctionNamePrefix,
      idleWaitSeconds: this.delivery.idleWaitSeconds,
      workerTimeoutSeconds: this.delivery.workerTimeoutSeconds,
      logRetention: this.logRetention,
      removalPolicy: this.removalPolicy,
    };
  }

  /**
   * What the TypeScript producer client (`lambdas/client`) needs, and no more: `sqs:SendMessage`
   * on the Host's queues (all of them, or those of `queueUids`), and `dynamodb:PutItem` on commit
   * records only — items whose partition key is `COMMIT#…`, with no attribute beyond the key and
   * the TTL — so a producer can neither overwrite API keys, secrets or Resources nor put an item
   * into an index the Host reads.
   */
  grantProduce(grantee: iam.IGrantable, opts: { readonly queueUids?: readonly string[] } = {}): iam.Grant {
    const stack = Stack.of(this);
    const queues =
      opts.queueUids === undefined
        ? [this.delivery.queueArnPattern]
        : opts.queueUids.map((uid) =>
            stack.formatArn({
              service: 'sqs',
              resource: `${this.delivery.queueNamePrefix}${uid}`,
              arnFormat: ArnFormat.NO_RESOURCE_NAME,
            }),
          );
    const send = iam.Grant.addToPrincipal({ grantee, actions: ['sqs:SendMessage'], resourceArns: queues });
    const principal = grantee.grantPrincipal;
    if (opts.queueUids === undefined && Construct.isConstruct(principal)) {
      Validations.of(principal).acknowledge({
        id: `AwsSolutions-IAM5[Resource::${nagResource(this, this.delivery.queueArnPattern)}]`,
        reason:
          'A producer of every Host queue: queues are created at run time as <prefix><uid>, so the prefix is the narrowest scope (grantProduce with queueUids names them).',
      });
    }
    const commits = iam.Grant.addToPrincipal({
      grantee,
      actions: ['dynamodb:PutItem'],
      resourceArns: [this.table.table.tableArn],
      conditions: {
        'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': [`${commitKey('')[TABLE_KEYS.pk]}*`] },
        'ForAllValues:StringEquals': {
          'dynamodb:Attributes': [TABLE_KEYS.pk, TABLE_KEYS.sk, TABLE_KEYS.ttl],
        },
      },
    });
    return send.combine(commits);
  }

  /** The URL clients use: the custom domain's, else the stage URL (non-conformant, see README). */
  get url(): string {
    return this.domainName ? `https://${this.domainName}/` : this.api.api.url;
  }
}
