import { Annotations, ArnFormat, type Duration, RemovalPolicy, Stack, Token, Validations } from 'aws-cdk-lib';
import { BasePathMapping, DomainName, EndpointType, SecurityPolicy } from 'aws-cdk-lib/aws-apigateway';
import type { ICertificate } from 'aws-cdk-lib/aws-certificatemanager';
import * as iam from 'aws-cdk-lib/aws-iam';
import type { IKey } from 'aws-cdk-lib/aws-kms';
import { RetentionDays } from 'aws-cdk-lib/aws-logs';
import { AaaaRecord, ARecord, type IHostedZone, RecordTarget } from 'aws-cdk-lib/aws-route53';
import { ApiGatewayDomain } from 'aws-cdk-lib/aws-route53-targets';
import type { ITopic } from 'aws-cdk-lib/aws-sns';
import { Construct } from 'constructs';
import { commitKey, ONLY_COPIES } from '../../lambdas/adapters/aws/dynamodb-commit-store.ts';
import { queueTagProblems } from '../../lambdas/adapters/aws/sqs-queue-backend.ts';
import { MAX_HANDLER_MS } from '../../lambdas/delivery/lane-kinds.ts';
import { parsePublicOrigin } from '../../lambdas/http/origin.ts';
import type { HostFunctionRole } from '../../lambdas/shared/host-concurrency.ts';
import { TABLE_KEYS } from '../../lambdas/shared/table-schema.ts';
import { ControlPlaneApi, RATE_LIMIT_PER_IP_RANGE } from './control-plane-api.ts';
import { DeliveryPipeline } from './delivery-pipeline.ts';
import { type FunctionSizing, hostFunctionSizing, validateSizing } from './host-function.ts';
import { type AlarmThresholds, HostObservability } from './host-observability.ts';
import { HostTable, TABLE_KEY_WRITE_ACTIONS } from './host-table.ts';
import { grantKeyUse } from './key-grants.ts';
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
   * (`<stem>_wkr-…`) and of the dispatchers (`<stem>_dispatcher-…`), so IAM can be scoped to
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
  /**
   * The longest any handler runs, counted from its own start: 1 minute..13 min 30 s (a batch —
   * gathering, registration, the handler — must fit one 15-minute Lambda invocation).
   * @default 13 min 30 s
   */
  readonly workerTimeout?: Duration;
  /**
   * How long a lane long-polls an empty queue before it ends, where it waits at all: for messages
   * sent straight to SQS or by the producer client without `wake`, and within a due lane's window.
   * Otherwise a lane polls once for 1 s, since sends through the Host wake a lane. 0..20 s.
   * @default 20
   */
  readonly idleWaitSeconds?: number;
  /**
   * Create the account-wide API Gateway CloudWatch role (`AWS::ApiGateway::Account`), which the
   * stage's execution logging needs. It is one setting per account and region, so the last stack
   * that sets it wins: set `false` where the account has one already (landing zones usually
   * manage it); the stage then logs through that role. @default true, so a fresh account works
   */
  readonly cloudWatchRole?: boolean;
  /**
   * Turn off the execute-api endpoint, so the API is reachable only through `domainName`.
   * Only with `domainName`. @default false
   */
  readonly disableExecuteApiEndpoint?: boolean;
  /**
   * The public hosted zone that holds `domainName`: it gets A and AAAA alias records to the
   * custom domain, so the origin resolves after `cdk deploy`. Only with `domainName`.
   * @default no DNS records (point the name at the domain's regional endpoint yourself)
   */
  readonly hostedZone?: IHostedZone;
  /**
   * A regional WAFv2 web ACL (`arn:aws:wafv2:<region>:<account>:regional/webacl/<name>/<id>`),
   * associated with the API stage. @default none
   */
  readonly webAclArn?: string;
  /**
   * Without `webAclArn`, the Host makes a regional WAFv2 web ACL for its stage with one
   * rate-based rule: a source IP that sends more than this many requests in 5 minutes is answered
   * 429 until its rate falls back. It bounds every client, anonymous ones included, below the
   * stage-wide `throttling` (which all clients share). 10..2,000,000,000, or `false` for no web
   * ACL. With `webAclArn`, rate limits are that web ACL's rules. @default 3000 (10 a second)
   */
  readonly rateLimitPerIp?: number | false;
  /**
   * A customer-managed KMS key for the Host table; the Host functions, worker registrations and
   * `grantProduce` get the key rights their table calls need. Needs a stack with an explicit
   * region. Give the key itself (`Key.fromKeyArn` of `arn:…:key/<key-id>`); an alias is refused.
   * @default an AWS-owned key
   */
  readonly tableEncryptionKey?: IKey;
  /**
   * A customer-managed KMS key for the queues the Host creates at run time; senders get
   * GenerateDataKey and Decrypt, workers Decrypt. Queues are encrypted in any case. Give the key
   * itself (`Key.fromKeyArn` of `arn:…:key/<key-id>`); an alias is refused.
   * @default SQS-managed server-side encryption
   */
  readonly queueEncryptionKey?: IKey;
  /**
   * Tags on every queue the Host creates at run time (they are set at `sqs:CreateQueue`, so an
   * SCP that requires tags there is met). At most 48 (the Host adds `takoform:resource-uid` and
   * `takoform:space`), SQS's key and value rules, no `aws:`/`takoform:` keys, ≤ 2,048 bytes of
   * JSON. @default none
   */
  readonly queueTags?: Readonly<Record<string, string>>;
  /** Active X-Ray tracing of the Host and worker functions, the dispatcher and the API stage. @default true */
  readonly tracing?: boolean;
  /**
   * Reserve concurrency for the Host's own functions, so that workers (whose lanes hold their
   * invocations for as long as a queue has messages) never take the whole account pool from
   * them: api 10, step 50, batchHost 100, executor 5, supervisor 2 (167 in all). Lambda keeps 100
   * of an account's pool unreserved, so an account whose quota is below 267 cannot deploy this:
   * set `false` there (a new account's quota is often 10), or size each function with
   * `hostFunctions`. @default true
   */
  readonly reserveConcurrency?: boolean;
  /**
   * Memory (MB) and reserved concurrency of each Host function; a `reservedConcurrentExecutions`
   * given here replaces that function's default reservation (see `reserveConcurrency`). Reserved
   * concurrency comes out of the account's regional pool: an account needs
   * `UnreservedConcurrentExecutions` of the sum reserved plus 100 (docs/deploy.md, Sizing).
   * @default 512 MB each (the batch host 1024); reserved concurrency as `reserveConcurrency` says
   */
  readonly hostFunctions?: {
    readonly api?: FunctionSizing;
    readonly step?: FunctionSizing;
    readonly batchHost?: FunctionSizing;
    readonly executor?: FunctionSizing;
    readonly supervisor?: FunctionSizing;
  };
}

const QUEUE_NAME_PREFIX = /^[a-z0-9](?:[a-z0-9-]{0,38}[a-z0-9])?$/;
const WEB_ACL_ARN =
  /^arn:aws[a-z-]*:wafv2:[a-z0-9-]+:\d{12}:regional\/webacl\/[A-Za-z0-9_-]{1,128}\/[a-f0-9-]{36}$/;
const HOST_FUNCTION_ROLES: readonly HostFunctionRole[] = [
  'api',
  'step',
  'batchHost',
  'executor',
  'supervisor',
];
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

/**
 * Reserved concurrency is carved out of the account's regional pool, and Lambda refuses a
 * reservation that leaves fewer than 100 executions unreserved — on an account whose quota is
 * below that (new accounts may start at 10), any reservation. The deploy would fail on such an
 * account with nothing in the template to say why, so the sum is stated at synth.
 */
function noteReservedConcurrency(scope: Construct, sizings: Record<HostFunctionRole, FunctionSizing>): void {
  const reserved = Object.values(sizings).reduce(
    (sum, sizing) => sum + (sizing.reservedConcurrentExecutions ?? 0),
    0,
  );
  if (reserved === 0) return;
  Annotations.of(scope).addInfo(
    `The Host's functions reserve ${reserved} concurrent executions of the account's regional Lambda ` +
      'concurrency. Lambda refuses a reservation that leaves fewer than 100 unreserved (on an account whose ' +
      "whole quota is below that, such as a new account's 10, any reservation): before the first deploy, " +
      `UnreservedConcurrentExecutions (aws lambda get-account-settings) must be at least ${reserved + 100}; ` +
      "otherwise request a higher 'Concurrent executions' quota in Service Quotas, or reserve less.",
  );
}

/**
 * An alias given where a key is expected (`Alias.fromAliasName`, or `Key.fromKeyArn` of an alias
 * ARN): its `keyArn` names the alias. Checked on the text, so an ARN with unresolved partition or
 * account tokens is still recognised.
 */
function isAlias(key: IKey): boolean {
  return 'aliasName' in key || /(?:^|:)alias\//.test(key.keyArn);
}

function aliasLabel(key: IKey): string {
  const name = 'aliasName' in key ? (key as { aliasName: string }).aliasName : key.keyArn;
  return Token.isUnresolved(name) ? 'an alias' : name;
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
  if (timeout !== undefined && (timeout < 60 || timeout > MAX_HANDLER_MS / 1000)) {
    errors.push(
      'workerTimeout must be 1 minute..13 min 30 s (a batch — gathering, registration, its handler — must fit one Lambda invocation)',
    );
  }
  const idle = props.idleWaitSeconds;
  if (idle !== undefined && !(Number.isInteger(idle) && idle >= 0 && idle <= 20)) {
    errors.push('idleWaitSeconds must be an integer in 0..20');
  }
  if (props.domainName === undefined) {
    if (props.disableExecuteApiEndpoint) {
      errors.push('disableExecuteApiEndpoint needs domainName: the API would have no endpoint');
    }
    if (props.hostedZone) errors.push('hostedZone needs domainName: there is no record to make');
  } else if (props.hostedZone && !Token.isUnresolved(props.domainName)) {
    const zone = props.hostedZone.zoneName;
    const name = props.domainName.toLowerCase();
    if (
      !Token.isUnresolved(zone) &&
      name !== zone.toLowerCase() &&
      !name.endsWith(`.${zone.toLowerCase()}`)
    ) {
      errors.push(`domainName ${props.domainName} is not in hostedZone ${zone}`);
    }
  }
  const acl = props.webAclArn;
  if (acl !== undefined && !Token.isUnresolved(acl) && !WEB_ACL_ARN.test(acl)) {
    errors.push(`webAclArn ${JSON.stringify(acl)} is not a regional WAFv2 web ACL ARN`);
  }
  const perIp = props.rateLimitPerIp;
  if (perIp !== undefined && perIp !== false) {
    const [min, max] = RATE_LIMIT_PER_IP_RANGE;
    if (!(Number.isInteger(perIp) && perIp >= min && perIp <= max)) {
      errors.push(`rateLimitPerIp must be an integer in ${min}..${max}, or false`);
    } else if (props.webAclArn !== undefined) {
      errors.push(
        'rateLimitPerIp and webAclArn exclude each other: a stage has one web ACL, so put the rate-based rule in the web ACL of webAclArn',
      );
    }
  }
  if (props.queueTags !== undefined) {
    errors.push(...queueTagProblems(props.queueTags).map((p) => `queueTags: ${p}`));
    if (Buffer.byteLength(JSON.stringify(props.queueTags)) > 2048)
      errors.push('queueTags: at most 2048 bytes of JSON');
  }
  for (const prop of ['tableEncryptionKey', 'queueEncryptionKey'] as const) {
    const key = props[prop];
    if (key && isAlias(key)) {
      errors.push(
        `${prop} is a KMS alias (${aliasLabel(key)}): IAM grants and key policies do not match aliases, so every table or queue call would be refused at run time; pass the key ARN (arn:aws:kms:<region>:<account>:key/<key-id>) with Key.fromKeyArn`,
      );
    }
  }
  for (const [role, sizing] of Object.entries(props.hostFunctions ?? {})) {
    if (!(HOST_FUNCTION_ROLES as readonly string[]).includes(role))
      errors.push(`hostFunctions.${role} is not a Host function`);
    errors.push(...validateSizing(`hostFunctions.${role}`, sizing));
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
  private readonly tracing: boolean;

  constructor(scope: Construct, id: string, props: TakoformHostProps = {}) {
    super(scope, id);
    this.queueNamePrefix = props.queueNamePrefix ?? deriveQueueNamePrefix(Stack.of(this).stackName);
    const errors = validateTakoformHostProps(props, this.queueNamePrefix);
    if (props.tableEncryptionKey && Token.isUnresolved(Stack.of(this).region)) {
      // DynamoDB global tables name the key per replica region.
      errors.push('tableEncryptionKey needs a stack with an explicit region (env)');
    }
    if (errors.length > 0) throw new Error(`TakoformHost ${this.node.path}: ${errors.join('; ')}`);

    const removalPolicy = props.removalPolicy ?? RemovalPolicy.RETAIN;
    const reserve = props.reserveConcurrency ?? true;
    const sizings = Object.fromEntries(
      HOST_FUNCTION_ROLES.map((role) => [
        role,
        hostFunctionSizing(role, props.hostFunctions?.[role], reserve),
      ]),
    ) as Record<HostFunctionRole, FunctionSizing>;
    const logRetention = props.logRetention ?? RetentionDays.ONE_MONTH;
    const origin =
      props.publicOrigin ?? (props.domainName ? `https://${props.domainName.toLowerCase()}` : undefined);

    this.table = new HostTable(this, 'Table', {
      encryptionKey: props.tableEncryptionKey,
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
      cloudWatchRole: props.cloudWatchRole,
      disableExecuteApiEndpoint: props.disableExecuteApiEndpoint,
      webAclArn: props.webAclArn,
      rateLimitPerIp: props.rateLimitPerIp,
      tracing: props.tracing,
      sizing: sizings.api,
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
      if (props.hostedZone) {
        const target = RecordTarget.fromAlias(new ApiGatewayDomain(this.domain));
        const record = { zone: props.hostedZone, recordName: props.domainName, target };
        new ARecord(this, 'AliasRecord', record);
        new AaaaRecord(this, 'AliasRecordIpv6', record);
      }
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
      tracing: props.tracing,
      functions: {
        step: sizings.step,
        batchHost: sizings.batchHost,
        executor: sizings.executor,
        supervisor: sizings.supervisor,
      },
      queueEncryptionKey: props.queueEncryptionKey,
      queueTags: props.queueTags,
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
      expressStateMachine: this.delivery.expressStateMachine,
      hostName: this.queueNamePrefix,
      queueNamePrefix: prefix,
      alarmTopic: props.alarmTopic,
      thresholds: props.alarmThresholds,
    });
    noteReservedConcurrency(this, sizings);
    this.logRetention = logRetention;
    this.removalPolicy = removalPolicy;
    this.tracing = props.tracing ?? true;
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
      tracing: this.tracing,
      tableEncryptionKey: this.table.encryptionKey,
      queueEncryptionKey: this.delivery.queueEncryptionKey,
    };
  }

  /**
   * The Host function the producer client's `lambdaWake` invokes after a send, so a lane starts
   * at once (created with the first `grantProduce`).
   */
  get wakeFunctionName(): string {
    return this.delivery.wakeFunction.fn.functionName;
  }

  /**
   * What the TypeScript producer client (`lambdas/client`) needs, and no more: `sqs:SendMessage`
   * on the Host's queues (all of them, or those of `queueUids`), `dynamodb:PutItem` on commit
   * records only — items whose partition key is `COMMIT#…`, with no attribute beyond the key, the
   * TTL and `onlyCopies` (which copy of a message to deliver when SQS took a send twice) — so a
   * producer can neither overwrite API keys, secrets or Resources nor put an item into an index
   * the Host reads; and `lambda:InvokeFunction` on the wake function (`wakeFunctionName`), which
   * takes no credential and can only start a lane for a queue of this Host.
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
    this.delivery.grantQueueKey(grantee, 'send');
    if (this.table.encryptionKey) grantKeyUse(grantee, this.table.encryptionKey, TABLE_KEY_WRITE_ACTIONS);
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
          'dynamodb:Attributes': [TABLE_KEYS.pk, TABLE_KEYS.sk, TABLE_KEYS.ttl, ONLY_COPIES],
        },
      },
    });
    // The unqualified function only (the client invokes it so): no version or alias wildcard.
    const wake = iam.Grant.addToPrincipal({
      grantee,
      actions: ['lambda:InvokeFunction'],
      resourceArns: [this.delivery.wakeFunction.fn.functionArn],
    });
    return send.combine(commits).combine(wake);
  }

  /** The URL clients use: the custom domain's, else the stage URL (non-conformant, see docs/deploy.md). */
  get url(): string {
    return this.domainName ? `https://${this.domainName}/` : this.api.api.url;
  }
}
