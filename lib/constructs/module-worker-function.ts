import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Duration, RemovalPolicy, Stack, Token, Validations } from 'aws-cdk-lib';
import type * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as iam from 'aws-cdk-lib/aws-iam';
import type { IKey } from 'aws-cdk-lib/aws-kms';
import type { CfnFunction, IFunction, ILayerVersion } from 'aws-cdk-lib/aws-lambda';
import { LogGroup, RetentionDays } from 'aws-cdk-lib/aws-logs';
import type { ISecret } from 'aws-cdk-lib/aws-secretsmanager';
import type { IParameter } from 'aws-cdk-lib/aws-ssm';
import { AwsCustomResource, AwsCustomResourcePolicy, PhysicalResourceId } from 'aws-cdk-lib/custom-resources';
import { Construct } from 'constructs';
import {
  REGISTRATION_ATTRIBUTES,
  registrationItem,
  workerRegistrationKey,
} from '../../lambdas/adapters/aws/dynamodb-worker-registry.ts';
import { QUEUE_TAGS } from '../../lambdas/adapters/aws/sqs-queue-backend.ts';
import { LAMBDA_MAX_MS, MAX_HANDLER_MS } from '../../lambdas/delivery/lane-kinds.ts';
import { ID_PATTERN } from '../../lambdas/engine/ids.ts';
import { AWS_ENV } from '../../lambdas/shared/aws-env.ts';
import { HOST_FUNCTION_MEMORY_MB } from '../../lambdas/shared/host-function-memory.ts';
import { TABLE_KEYS } from '../../lambdas/shared/table-schema.ts';
import { SECRET_NAME_PATTERN, type SecretRefs } from '../../lambdas/worker-runtime/secret-refs.ts';
import { SQS_ACTIONS } from './delivery-pipeline.ts';
import { HostFunction } from './host-function.ts';
import { TABLE_KEY_WRITE_ACTIONS } from './host-table.ts';
import { grantKeyUse } from './key-grants.ts';
import { lambdaEntry } from './lambda-entry.ts';
import { nagResource } from './nag.ts';

const WORKER_ENTRY = lambdaEntry('entries/module-worker.ts');
const HANDLER_NAMES = ['fetch', 'scheduled', 'queue'] as const;
type HandlerName = (typeof HANDLER_NAMES)[number];
/** Lambda's limit for all environment variables together is 4 KB; leave room for the others. */
const MAX_CONFIG_BYTES = 3_000;
/** Lambda's bound on one invocation: every worker function's timeout (see `timeout`). */
const LAMBDA_MAX_SECONDS = LAMBDA_MAX_MS / 1000;
/** The longest handler bound (`timeout`): a whole batch of any consumer fits one invocation. */
const MAX_HANDLER_SECONDS = MAX_HANDLER_MS / 1000;
/**
 * The timeout when none is given (then capped by the Host's workerTimeout): 3 minutes, so that a
 * batch of any consumer settings fits an Express lane's window (`lane-kinds.ts`).
 */
const DEFAULT_TIMEOUT_SECONDS = 180;
/** Names Lambda reserves, and the runtime's own (`TAKOFORM_*`): not settable through `environment`. */
const RESERVED_ENV =
  /^(?:TAKOFORM_.*|AWS_.*|_HANDLER|_X_AMZN_TRACE_ID|LAMBDA_TASK_ROOT|LAMBDA_RUNTIME_DIR|TZ)$/;

/** What a worker needs of the Host it belongs to (TakoformHost.workerBinding provides it). */
export interface WorkerHostBinding {
  /** The Host table's ARN and name (registrations live there; the worker itself gets no access). */
  readonly tableArn: string;
  readonly tableName: string;
  /** The one Host function a worker may invoke. */
  readonly batchHostFunction: IFunction;
  /** `arn:…:sqs:<region>:<account>:<prefix>*`, and the prefix itself. */
  readonly queueArnPattern: string;
  readonly queueNamePrefix: string;
  /** Worker functions are named with this prefix; the dispatcher may invoke only those. */
  readonly workerFunctionNamePrefix: string;
  readonly idleWaitSeconds: number;
  /** The Host's bound on one handler from its own start (its `workerTimeout`), in seconds. @default none */
  readonly workerTimeoutSeconds?: number;
  readonly logRetention?: RetentionDays;
  readonly removalPolicy?: RemovalPolicy;
  /** Active X-Ray tracing of worker functions, as the Host's. @default true */
  readonly tracing?: boolean;
  /** The Host table's customer-managed key (the registration writes the table). @default none */
  readonly tableEncryptionKey?: IKey;
  /** The queues' customer-managed key (the worker receives from them). @default none */
  readonly queueEncryptionKey?: IKey;
}

export interface ModuleWorkerFunctionProps {
  readonly host: WorkerHostBinding;
  /**
   * The worker module (`.mjs`, `.js` or `.ts`; its default export is a plain object): an absolute
   * path, a `file:` URL such as `new URL('./workers/orders.mjs', import.meta.url)`, or a path
   * relative to `entryBase`. Never resolved against the process's working directory, so the same
   * app synthesizes alike from any directory; a missing file is a synth error.
   */
  readonly entry: string | URL;
  /**
   * What a relative `entry` is resolved against: a directory path, or the calling module's
   * `import.meta.url` (its directory is used). @default none (a relative `entry` is an error)
   */
  readonly entryBase?: string | URL;
  /** The Space and name of the ModuleWorker Resource this code serves. */
  readonly space: string;
  readonly name: string;
  /**
   * JSON values given to handlers as `env.<name>`. Not secret: they are in the template, the
   * function's environment and the Host's registration item. Use `secrets` for credentials.
   * @default {}
   */
  readonly vars?: Record<string, unknown>;
  /**
   * Secrets given to handlers as `env.<NAME>` strings (names `^[A-Z][A-Z0-9_]{0,63}$`, distinct
   * from vars and producer bindings): a Secrets Manager secret (its `SecretString`) or an SSM
   * parameter (String or SecureString, decrypted). Only the reference is deployed; the worker
   * runtime reads the values once per sandbox, before its first batch, and an unreadable one fails
   * the invocation before any message is received. This function alone is granted read on each.
   * A rotated value reaches new sandboxes only. @default {}
   */
  readonly secrets?: Record<string, ISecret | IParameter>;
  /**
   * Extra environment variables of the function's process (`process.env`, not the handler's
   * `env`), e.g. a library's settings; in the template in plain text, like `vars`. Lambda's
   * reserved names and `TAKOFORM_*` are refused. @default none
   */
  readonly environment?: Record<string, string>;
  /** Lambda layers (at most 5). @default none */
  readonly layers?: ILayerVersion[];
  /**
   * Runs the function in this VPC. It calls SQS and Lambda (and Secrets Manager or SSM for
   * `secrets`, X-Ray when tracing), so the subnets need a NAT route or interface endpoints for
   * those services. @default no VPC
   */
  readonly vpc?: ec2.IVpc;
  /** Only with `vpc`. @default the VPC's private subnets */
  readonly vpcSubnets?: ec2.SubnetSelection;
  /** Only with `vpc`. @default one new security group allowing all outbound traffic */
  readonly securityGroups?: ec2.ISecurityGroup[];
  /** Binding name → `{queue: '<queue Resource name in the same Space>'}`. @default {} */
  readonly queueProducers?: Record<string, { queue: string }>;
  /**
   * How long each handler may run, counted from its own start: 30 s up to the Host's
   * `workerTimeout` (at most 13 min 30 s). The function's Lambda timeout is always 15 minutes, so
   * one invocation can run a lane's batches one after another; a batch starts only while all of
   * it (gathering, registration, this bound) still fits the invocation. Slots of this worker's
   * consumers are held for this bound, so a shorter one has a crashed invocation's batch recovered
   * that much sooner. Consumers of a worker whose batch (idle wait + batch timeout + this bound)
   * fits in Step Functions Express's five minutes run their lanes on Express, at a fraction of
   * Standard's cost; others on Standard. @default 3 min (every consumer setting then fits
   * Express), or the Host's `workerTimeout` when that is shorter
   */
  readonly timeout?: Duration;
  /** @default 512 */
  readonly memorySize?: number;
  /**
   * The module's declared handlers. By default they are read from the module at synth time, in a
   * child Node.js process (the module's top-level code runs there). @default introspected
   */
  readonly handlers?: readonly HandlerName[];
}

/** Callable own data properties of the module's default export, read in a child process. */
export function introspectHandlers(entry: string): HandlerName[] {
  const script = `
const m = await import(${JSON.stringify(pathToFileURL(entry).href)});
const d = m.default;
const plain = d !== null && typeof d === 'object' && !Array.isArray(d);
const own = (n) => { const p = plain ? Object.getOwnPropertyDescriptor(d, n) : undefined; return p !== undefined && 'value' in p && typeof p.value === 'function'; };
process.stdout.write(JSON.stringify(${JSON.stringify(HANDLER_NAMES)}.filter(own)));`;
  const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], {
    timeout: 20_000,
    stdio: ['ignore', 'pipe', 'pipe'],
    cwd: path.dirname(entry),
  });
  return JSON.parse(out.toString('utf8')) as HandlerName[];
}

const shortHash = (text: string, n: number) => createHash('sha256').update(text).digest('hex').slice(0, n);

/**
 * One ModuleWorker's code on AWS: a Lambda function built from the worker module plus this
 * project's runtime adapter (lambdas/worker-runtime), and its registration in the Host table.
 *
 * - Bundling: the fixed entry `entries/module-worker.ts` imports `takoform-worker-module`, which
 *   esbuild's `alias` points at `entry`; no file is generated and nothing needs Docker.
 * - IAM: `sqs:ReceiveMessage` on the Host's queues tagged `takoform:space = <space>` only (it
 *   receives its own batches; user code runs with this role, so it must not reach other Spaces'
 *   queues), `lambda:InvokeFunction` on the batch-host function only, its own log group, read
 *   on its own `secrets`; no DynamoDB.
 * - Secrets: only references (secret ARN, parameter name) are deployed, in the function's
 *   environment; the runtime reads the values at cold start (lambdas/worker-runtime/worker-secrets.ts).
 * - Registration: a custom resource puts `WORKER#<space>#<name>` (function ARN, declared
 *   handlers, vars, producer bindings, timeout, deployment uid = hash of the code asset and the
 *   configuration) on create and update, and deletes it when the worker leaves the stack.
 */
export class ModuleWorkerFunction extends Construct {
  readonly function: HostFunction;
  readonly functionName: string;
  readonly deploymentUid: string;
  readonly handlers: readonly HandlerName[];
  /** Each handler's bound from its own start, recorded in the registration (slot deadlines derive from it). */
  readonly timeout: Duration;
  readonly registration: AwsCustomResource;

  constructor(scope: Construct, id: string, props: ModuleWorkerFunctionProps) {
    super(scope, id);
    const errors = validate(props);
    const taken = registeredNames.get(Stack.of(this)) ?? new Set<string>();
    registeredNames.set(Stack.of(this), taken);
    if (taken.has(`${props.space}/${props.name}`)) {
      errors.push(`${props.space}/${props.name} already has a ModuleWorkerFunction in this stack`);
    }
    taken.add(`${props.space}/${props.name}`);
    if (errors.length > 0) {
      throw new Error(`ModuleWorkerFunction ${this.node.path}: ${errors.join('; ')}`);
    }
    const stack = Stack.of(this);
    const entry = resolveEntry(props.entry, props.entryBase) as string;
    this.handlers = props.handlers ?? introspectHandlers(entry);
    const config = { vars: props.vars ?? {}, queueProducers: props.queueProducers ?? {} };
    const plainJson = stack.toJsonString({ ...config, environment: props.environment ?? {} });
    if (!Token.isUnresolved(plainJson) && Buffer.byteLength(plainJson) > MAX_CONFIG_BYTES) {
      throw new Error(
        `ModuleWorkerFunction ${this.node.path}: vars, queueProducers and environment exceed ${MAX_CONFIG_BYTES} bytes of JSON`,
      );
    }
    const host = props.host;
    // Named under the Host's prefix (the dispatcher may invoke only those), and after this
    // construct's path: a worker moved to another path is a new function, which CloudFormation
    // creates before it deletes the old one, so the two names must differ.
    this.functionName = `${host.workerFunctionNamePrefix}${shortHash(this.node.addr, 16)}`;
    this.timeout = props.timeout ?? Duration.seconds(Math.min(DEFAULT_TIMEOUT_SECONDS, hostBoundOf(host)));
    const secretRefs = secretReferences(props.secrets ?? {});
    const configJson = stack.toJsonString(props.secrets ? { ...config, secrets: secretRefs } : config);

    this.function = new HostFunction(this, 'Worker', {
      entry: WORKER_ENTRY,
      description: `Takoform ModuleWorker ${props.space}/${props.name}`,
      functionName: this.functionName,
      timeout: Duration.seconds(LAMBDA_MAX_SECONDS),
      memorySize: props.memorySize ?? HOST_FUNCTION_MEMORY_MB.worker,
      logRetention: host.logRetention,
      removalPolicy: host.removalPolicy,
      tracing: host.tracing,
      esbuildArgs: { '--alias:takoform-worker-module': entry },
      layers: props.layers,
      ...(props.vpc
        ? { vpc: { vpc: props.vpc, subnets: props.vpcSubnets, securityGroups: props.securityGroups } }
        : {}),
      environment: {
        ...props.environment,
        [AWS_ENV.batchHostFunction]: host.batchHostFunction.functionArn,
        [AWS_ENV.idleWaitSeconds]: String(host.idleWaitSeconds),
        [AWS_ENV.workerConfig]: configJson,
      },
    });
    const fn = this.function.fn;
    // SQS ABAC: the executor tags every queue with its Resource's Space at CreateQueue (and again
    // at each update); a consumer's queue is in its worker's Space, so this is all it needs.
    fn.addToRolePolicy(
      new iam.PolicyStatement({
        sid: 'ReceiveFromOwnSpaceQueues',
        actions: [...SQS_ACTIONS.worker],
        resources: [host.queueArnPattern],
        conditions: { StringEquals: { [`aws:ResourceTag/${QUEUE_TAGS.space}`]: props.space } },
      }),
    );
    fn.addToRolePolicy(
      new iam.PolicyStatement({
        actions: ['lambda:InvokeFunction'],
        resources: [host.batchHostFunction.functionArn],
      }),
    );
    // Receiving from an SSE-KMS queue decrypts with its key.
    if (host.queueEncryptionKey) grantKeyUse(fn, host.queueEncryptionKey, ['kms:Decrypt']);
    // Each secret is readable by this function's role only (and its key, when it has one).
    for (const secret of Object.values(props.secrets ?? {})) secret.grantRead(fn);
    Validations.of(this.function.role).acknowledge({
      id: `AwsSolutions-IAM5[Resource::${nagResource(this, host.queueArnPattern)}]`,
      reason:
        "A worker receives batches from whichever queue its consumer names; queues exist only at run time, under the prefix, and the grant is conditioned on the queue's takoform:space tag.",
    });

    // The deployment uid changes exactly when the code asset or the configuration changes.
    const code = (fn.node.defaultChild as CfnFunction).code as CfnFunction.CodeProperty;
    const assetKey = JSON.stringify(stack.resolve(code.s3Key ?? ''));
    // Secrets and environment count only when given, so a worker without them keeps its uid.
    const configured = stack.resolve({
      ...config,
      ...(props.secrets ? { secrets: secretRefs } : {}),
      ...(props.environment ? { environment: props.environment } : {}),
    });
    this.deploymentUid = `mw-${shortHash(`${assetKey}\0${JSON.stringify(configured)}\0${this.handlers.join(',')}`, 24)}`;

    const key = workerRegistrationKey(props.space, props.name);
    const item = registrationItem({
      space: props.space,
      name: props.name,
      functionArn: fn.functionArn,
      handlers: this.handlers,
      varsJson: stack.toJsonString(config.vars),
      queueProducersJson: stack.toJsonString(config.queueProducers),
      deploymentUid: this.deploymentUid,
      timeoutSeconds: this.timeout.toSeconds(),
    });
    this.registration = registrationResource(this, host, key, item, fn.functionArn);
    // No explicit dependency on the function: the item names its ARN, which orders the two already.
    acknowledgeRegistrationProvider(stack);
  }
}

/**
 * The custom resource that puts a worker's registration item on create and update and deletes it
 * with the worker. The provider function and its role are shared by every AwsCustomResource of
 * the stack; each registration adds the right to write its own item and nothing else of the
 * table (API keys, secrets, Resources live there too).
 */
function registrationResource(
  scope: Construct,
  host: WorkerHostBinding,
  key: Record<string, unknown>,
  item: Record<string, unknown>,
  functionArn: string,
): AwsCustomResource {
  const pk = key[TABLE_KEYS.pk] as string;
  const put = {
    service: 'DynamoDB',
    action: 'putItem',
    parameters: { TableName: host.tableName, Item: item },
    physicalResourceId: PhysicalResourceId.of(pk),
  };
  return new AwsCustomResource(scope, 'Registration', {
    resourceType: 'Custom::TakoformWorkerRegistration',
    onCreate: put,
    onUpdate: put,
    // Only while the item still names this function: when the worker moved to another construct
    // path, CloudFormation creates the new registration first and deletes the old one after, and
    // that delete must leave the new worker's item.
    onDelete: {
      service: 'DynamoDB',
      action: 'deleteItem',
      parameters: {
        TableName: host.tableName,
        Key: { pk: { S: pk }, sk: { S: '_' } },
        ConditionExpression: '#fn = :fn',
        ExpressionAttributeNames: { '#fn': REGISTRATION_ATTRIBUTES.functionArn },
        ExpressionAttributeValues: { ':fn': { S: functionArn } },
      },
      ignoreErrorCodesMatching: 'ConditionalCheckFailedException',
    },
    policy: AwsCustomResourcePolicy.fromStatements([
      new iam.PolicyStatement({
        actions: ['dynamodb:PutItem', 'dynamodb:DeleteItem'],
        resources: [host.tableArn],
        conditions: {
          'ForAllValues:StringEquals': { 'dynamodb:LeadingKeys': [pk] },
          Null: { 'dynamodb:LeadingKeys': 'false' },
        },
      }),
      ...(host.tableEncryptionKey
        ? [
            new iam.PolicyStatement({
              actions: TABLE_KEY_WRITE_ACTIONS,
              resources: [host.tableEncryptionKey.keyArn],
            }),
          ]
        : []),
    ]),
    installLatestAwsSdk: false,
    logGroup: registrationLogs(Stack.of(scope), host),
  });
}

/** One log group for the stack's shared registration provider (AwsCustomResource's singleton). */
function registrationLogs(stack: Stack, host: WorkerHostBinding): LogGroup {
  const id = 'TakoformWorkerRegistrationLogs';
  return (
    (stack.node.tryFindChild(id) as LogGroup | undefined) ??
    new LogGroup(stack, id, {
      retention: host.logRetention ?? RetentionDays.ONE_MONTH,
      removalPolicy: host.removalPolicy ?? RemovalPolicy.RETAIN,
    })
  );
}

/** The provider function AwsCustomResource shares across the stack; acknowledged once. */
function acknowledgeRegistrationProvider(stack: Stack): void {
  const provider = stack.node.tryFindChild(AWS_CUSTOM_RESOURCE_PROVIDER_ID);
  const role = provider?.node.tryFindChild('ServiceRole');
  if (!role || acknowledged.has(role)) return;
  acknowledged.add(role);
  Validations.of(role).acknowledge({
    id: 'AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]',
    reason:
      "AwsCustomResource's shared provider role comes with the AWS-managed basic execution policy (logs only); its DynamoDB rights are the registrations' own PutItem/DeleteItem on the Host table.",
  });
}

/** The construct id AwsCustomResource gives its singleton provider function. */
const AWS_CUSTOM_RESOURCE_PROVIDER_ID = 'AWS679f53fac002430cb0da5b7982bd2287';
const acknowledged = new WeakSet<object>();
/** (space/name) pairs per stack: two registrations of one worker would overwrite each other. */
const registeredNames = new WeakMap<Stack, Set<string>>();

/**
 * The entry's absolute path: a `file:` URL or an absolute path as given, a relative path against
 * `base` (a directory, or a module's `file:` URL, whose directory counts). Undefined when a
 * relative path has no base.
 */
export function resolveEntry(entry: string | URL, base?: string | URL): string | undefined {
  if (entry instanceof URL || entry.startsWith('file:')) return fileURLToPath(entry);
  if (path.isAbsolute(entry)) return entry;
  if (base === undefined) return undefined;
  if (base instanceof URL || base.startsWith('file:')) return fileURLToPath(new URL(entry, base));
  return path.resolve(base, entry);
}

/** The Host's bound on one handler; the most a worker can have when the binding names none. */
function hostBoundOf(host: WorkerHostBinding): number {
  return host.workerTimeoutSeconds ?? MAX_HANDLER_SECONDS;
}

const isSecret = (ref: ISecret | IParameter): ref is ISecret => 'secretArn' in ref;

/** What the runtime reads for each secret: a secret's full ARN (else its name), a parameter's name. */
function secretReferences(secrets: Record<string, ISecret | IParameter>): SecretRefs {
  return Object.fromEntries(
    Object.entries(secrets).map(([name, ref]) => [
      name,
      isSecret(ref)
        ? { secretsManager: ref.secretFullArn ?? ref.secretName }
        : { ssmParameter: ref.parameterName },
    ]),
  );
}

function validate(props: ModuleWorkerFunctionProps): string[] {
  const errors: string[] = [];
  if (!ID_PATTERN.test(props.space)) errors.push(`space ${JSON.stringify(props.space)} is not an identifier`);
  if (!ID_PATTERN.test(props.name)) errors.push(`name ${JSON.stringify(props.name)} is not an identifier`);
  const entry = resolveEntry(props.entry, props.entryBase);
  if (entry === undefined) {
    errors.push(
      `entry ${props.entry} is relative: give an absolute path, a file: URL (new URL('./worker.mjs', import.meta.url)) or entryBase`,
    );
  } else if (!existsSync(entry)) errors.push(`entry ${entry} does not exist`);
  const timeout = props.timeout?.toSeconds();
  const bound = hostBoundOf(props.host);
  if (timeout !== undefined && (timeout < 30 || timeout > MAX_HANDLER_SECONDS)) {
    errors.push(
      'timeout must be 30 s..13 min 30 s (a batch — gathering, registration and the handler — must fit one 15-minute Lambda invocation)',
    );
  } else if (timeout !== undefined && timeout > bound) {
    errors.push(
      `timeout ${timeout} s exceeds the Host's workerTimeout of ${bound} s: the Host holds a slot and runs a handler at most that long, so lower the timeout or raise the Host's workerTimeout`,
    );
  }
  const memory = props.memorySize;
  if (memory !== undefined && (!Number.isInteger(memory) || memory < 128 || memory > 10_240)) {
    errors.push('memorySize must be an integer in 128..10240');
  }
  const vars = Object.keys(props.vars ?? {});
  for (const [binding, target] of Object.entries(props.queueProducers ?? {})) {
    if (!/^[A-Za-z_$][A-Za-z0-9_$]{0,127}$/.test(binding))
      errors.push(`queueProducers: ${JSON.stringify(binding)} is not a binding name`);
    if (vars.includes(binding))
      errors.push(`${JSON.stringify(binding)} is both a var and a producer binding`);
    if (!target || typeof target.queue !== 'string' || !ID_PATTERN.test(target.queue)) {
      errors.push(`queueProducers.${binding}.queue must name a queue Resource`);
    }
  }
  for (const name of Object.keys(props.secrets ?? {})) {
    if (!SECRET_NAME_PATTERN.test(name))
      errors.push(`secrets: ${JSON.stringify(name)} does not match ${SECRET_NAME_PATTERN.source}`);
    if (vars.includes(name) || Object.hasOwn(props.queueProducers ?? {}, name))
      errors.push(`${JSON.stringify(name)} is both a secret and a var or producer binding`);
  }
  for (const name of Object.keys(props.environment ?? {})) {
    if (!/^[A-Za-z_][A-Za-z0-9_]{0,127}$/.test(name) || RESERVED_ENV.test(name))
      errors.push(`environment: ${JSON.stringify(name)} is reserved or not a variable name`);
  }
  if ((props.layers?.length ?? 0) > 5) errors.push('layers: at most 5');
  if (!props.vpc && (props.vpcSubnets || props.securityGroups))
    errors.push('vpcSubnets and securityGroups need vpc');
  for (const h of props.handlers ?? []) {
    if (!HANDLER_NAMES.includes(h)) errors.push(`handlers: unknown handler ${JSON.stringify(h)}`);
  }
  return errors;
}
