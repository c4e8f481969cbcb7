import { ArnFormat, Duration, type RemovalPolicy, Stack, Validations } from 'aws-cdk-lib';
import { Rule, Schedule } from 'aws-cdk-lib/aws-events';
import { LambdaFunction } from 'aws-cdk-lib/aws-events-targets';
import * as iam from 'aws-cdk-lib/aws-iam';
import type { IKey } from 'aws-cdk-lib/aws-kms';
import type { Function as LambdaFn } from 'aws-cdk-lib/aws-lambda';
import { LogGroup, RetentionDays } from 'aws-cdk-lib/aws-logs';
import { DefinitionBody, LogLevel, StateMachine, StateMachineType } from 'aws-cdk-lib/aws-stepfunctions';
import { Construct } from 'constructs';
import { dispatcherDefinition } from '../../lambdas/delivery/dispatcher-definition.ts';
import { type LaneKind, MAX_HANDLER_MS } from '../../lambdas/delivery/lane-kinds.ts';
import { AWS_ENV, METRICS_NAMESPACE } from '../../lambdas/shared/aws-env.ts';
import type { HostFunctionRole } from '../../lambdas/shared/host-concurrency.ts';
import { HOST_FUNCTION_MEMORY_MB } from '../../lambdas/shared/host-function-memory.ts';
import { type FunctionSizing, HostFunction } from './host-function.ts';
import type { HostTable } from './host-table.ts';
import { grantKeyUse } from './key-grants.ts';
import { lambdaEntry } from './lambda-entry.ts';
import { nagResource } from './nag.ts';

/** The SQS actions each Host function calls, and nothing else (SEC-02). */
export const SQS_ACTIONS = {
  /** Acquire and recover read queue URLs only; recovery without receipt handles writes DynamoDB. */
  step: ['sqs:GetQueueUrl'],
  /** register/finalize/deadLetter/produce: hide, delete, send (batch calls use these actions). */
  batchHost: ['sqs:ChangeMessageVisibility', 'sqs:DeleteMessage', 'sqs:GetQueueUrl', 'sqs:SendMessage'],
  /** Queue Resources: create (with tags), update, inspect, delete. */
  executor: [
    'sqs:CreateQueue',
    'sqs:DeleteQueue',
    'sqs:GetQueueAttributes',
    'sqs:GetQueueUrl',
    'sqs:SetQueueAttributes',
    'sqs:TagQueue',
  ],
  /** Backlog and dead-letter depth per consumer; the Space tag on queues made before it existed. */
  supervisor: ['sqs:GetQueueAttributes', 'sqs:GetQueueUrl', 'sqs:TagQueue'],
  /**
   * The HTTP producer extension and the operator endpoints (`/ext/queues/v1/…`): send; counts;
   * peek (receive, then visible again); redrive (receive, send, delete); purge.
   */
  api: [
    'sqs:ChangeMessageVisibility',
    'sqs:DeleteMessage',
    'sqs:GetQueueAttributes',
    'sqs:GetQueueUrl',
    'sqs:PurgeQueue',
    'sqs:ReceiveMessage',
    'sqs:SendMessage',
  ],
  /** Worker runtimes receive their own batches; everything else goes through the batch host. */
  worker: ['sqs:ReceiveMessage'],
} as const;

/** Where AWS services deliver logs without a resource-policy entry per log group. */
export const VENDED_LOGS_PREFIX = '/aws/vendedlogs/states/';

export interface DeliveryPipelineProps {
  readonly table: HostTable;
  /** The Host's name: the `host` dimension of the metrics its functions emit. */
  readonly hostName: string;
  /** Prefix of every SQS queue name, ending with `_` (e.g. `takoform-host_`). */
  readonly queueNamePrefix: string;
  /** The public origin (every Host function composes the same Host). */
  readonly publicOrigin: string;
  /** The longest a handler runs from its own start; a batch must fit Lambda's 15 minutes. @default 13 min 30 s */
  readonly workerTimeout?: Duration;
  /** How long an idle lane long-polls before resting (0..20 s). @default 20 */
  readonly idleWaitSeconds?: number;
  /** @default RetentionDays.ONE_MONTH */
  readonly logRetention?: RetentionDays;
  /** For the log groups. @default RETAIN */
  readonly removalPolicy?: RemovalPolicy;
  /** Active X-Ray tracing of the functions and the state machine. @default true */
  readonly tracing?: boolean;
  /** A customer-managed KMS key for the queues the executor creates. @default SQS-managed SSE */
  readonly queueEncryptionKey?: IKey;
  /** Tags for the queues the executor creates (already validated). @default none */
  readonly queueTags?: Readonly<Record<string, string>>;
  /** Memory and reserved concurrency per function. @default `HOST_FUNCTION_MEMORY_MB`, none reserved */
  readonly functions?: {
    readonly step?: FunctionSizing;
    readonly batchHost?: FunctionSizing;
    readonly executor?: FunctionSizing;
    readonly supervisor?: FunctionSizing;
    /** The wake function, created only for producers outside the Host (`wakeFunction`). */
    readonly wake?: FunctionSizing;
  };
}

/** `arn:…:states:<region>:<account>:stateMachine:<name>`. */
function stateMachineArn(stack: Stack, name: string): string {
  return stack.formatArn({
    service: 'states',
    resource: 'stateMachine',
    resourceName: name,
    arnFormat: ArnFormat.COLON_RESOURCE_NAME,
  });
}

/**
 * Delivery on AWS: the dispatcher state machine (the exact `dispatcherDefinition` the local Host
 * runs), its Host-step function, the batch-host function worker runtimes call, the Operation
 * executor and the dispatcher supervisor with their one-minute schedules, and the IAM that ties
 * them together. SQS permissions are scoped to `arn:…:sqs:<region>:<account>:<prefix>*`, DynamoDB
 * to the Host table, and the state machine may invoke only the step function and functions named
 * `<workerFunctionNamePrefix>*` (the names ModuleWorkerFunction gives its functions).
 */
export class DeliveryPipeline extends Construct {
  readonly stepFunction: HostFunction;
  readonly batchHostFunction: HostFunction;
  readonly executorFunction: HostFunction;
  readonly supervisorFunction: HostFunction;
  readonly stateMachine: StateMachine;
  /** The Express dispatcher: the same states, for lanes whose batches fit its five-minute window. */
  readonly expressStateMachine: StateMachine;
  readonly stateMachineLogs: LogGroup;
  /** The dispatcher state machines' names and ARNs (known before they are created). */
  readonly dispatcherName: string;
  readonly dispatcherArn: string;
  readonly expressDispatcherName: string;
  readonly expressDispatcherArn: string;
  /** `arn:…:sqs:<region>:<account>:<prefix>*`. */
  readonly queueArnPattern: string;
  /** Worker functions must be named with this prefix for the dispatcher to invoke them. */
  readonly workerFunctionNamePrefix: string;
  readonly queueNamePrefix: string;
  readonly hostName: string;
  readonly idleWaitSeconds: number;
  /** The Host's bound on one worker invocation, in seconds. */
  readonly workerTimeoutSeconds: number;
  /** The queues' customer-managed key, when one was given. */
  readonly queueEncryptionKey?: IKey;
  private wake: HostFunction | undefined;
  private readonly wakeProps: { retention: RetentionDays; tracing: boolean; props: DeliveryPipelineProps };

  constructor(scope: Construct, id: string, props: DeliveryPipelineProps) {
    super(scope, id);
    const stack = Stack.of(this);
    const retention = props.logRetention ?? RetentionDays.ONE_MONTH;
    const tracing = props.tracing ?? true;
    this.queueNamePrefix = props.queueNamePrefix;
    this.hostName = props.hostName;
    this.idleWaitSeconds = props.idleWaitSeconds ?? 20;
    this.workerFunctionNamePrefix = `${props.queueNamePrefix}wkr-`;
    this.queueArnPattern = stack.formatArn({
      service: 'sqs',
      resource: `${props.queueNamePrefix}*`,
      arnFormat: ArnFormat.NO_RESOURCE_NAME,
    });
    // Named (the functions that start lanes know the ARNs without a reference cycle), under the
    // Host's prefix, and after this construct's path: moved to another path, the machines are new
    // resources, which CloudFormation creates before it deletes the old ones.
    const pathTag = this.node.addr.slice(-8);
    this.dispatcherName = `${props.queueNamePrefix}dispatcher-${pathTag}`;
    this.dispatcherArn = stateMachineArn(stack, this.dispatcherName);
    this.expressDispatcherName = `${props.queueNamePrefix}dispatcher-express-${pathTag}`;
    this.expressDispatcherArn = stateMachineArn(stack, this.expressDispatcherName);
    this.workerTimeoutSeconds = (props.workerTimeout ?? Duration.millis(MAX_HANDLER_MS)).toSeconds();

    this.wakeProps = { retention, tracing, props };
    const functions = this.createHostFunctions(props, retention, tracing);
    this.stepFunction = functions.step;
    this.batchHostFunction = functions.batchHost;
    this.executorFunction = functions.executor;
    this.supervisorFunction = functions.supervisor;

    this.queueEncryptionKey = props.queueEncryptionKey;
    this.configureQueueCreation(props);
    this.grantQueueKey(this.batchHostFunction.fn, 'send'); // dead-letter moves and produce

    this.grantQueues(this.stepFunction.fn, SQS_ACTIONS.step);
    this.grantQueues(this.batchHostFunction.fn, SQS_ACTIONS.batchHost);
    this.grantQueues(this.executorFunction.fn, SQS_ACTIONS.executor);
    this.grantQueues(this.supervisorFunction.fn, SQS_ACTIONS.supervisor);

    // The dispatcher: the same ASL the local Host runs, with the step function's ARN filled in.
    // Under /aws/vendedlogs/: Step Functions then delivers logs without adding this group to the
    // account's CloudWatch Logs resource policy, which is capped at 5,120 characters and shared by
    // every stack in the account and region.
    this.stateMachineLogs = new LogGroup(this, 'DispatcherLogs', {
      logGroupName: `${VENDED_LOGS_PREFIX}${this.dispatcherName}`,
      retention,
      removalPolicy: props.removalPolicy,
    });
    // Two machines of the same states (lane-kinds.ts): Standard (billed per transition, no time
    // limit) and Express (billed per request and duration, five minutes), which lanes of
    // consumers whose batches fit its window start on.
    this.stateMachine = this.createDispatcher('Dispatcher', this.dispatcherName, 'standard', tracing);
    this.expressStateMachine = this.createDispatcher(
      'DispatcherExpress',
      this.expressDispatcherName,
      'express',
      tracing,
    );

    // Lanes are started by the supervisor (backlog), the step function (hand-over, a full
    // batch's next slot), the batch host (a full batch within an invocation), the executor (a
    // consumer's new generation, the moment its update applies: without it a backlog waits for
    // the supervisor's next round) and the API (wake on send, in bindApi). Only StartExecution,
    // only on these state machines.
    for (const f of [
      this.supervisorFunction,
      this.stepFunction,
      this.batchHostFunction,
      this.executorFunction,
    ])
      this.grantStartLanes(f);
    this.grantMetricsRead('SupervisorMetricsRead', this.supervisorFunction.role);
    this.scheduleSafetyNet();
  }

  /**
   * The four Host functions of delivery, each bound to the Host table. Created in this order: the
   * template lists resources in creation order.
   */
  /** What every Host function of delivery is configured with. */
  private hostEnvironment(props: DeliveryPipelineProps): Record<string, string> {
    return {
      [AWS_ENV.queuePrefix]: props.queueNamePrefix,
      [AWS_ENV.hostName]: props.hostName,
      [AWS_ENV.publicOrigin]: props.publicOrigin,
      [AWS_ENV.workerTimeoutSeconds]: String(this.workerTimeoutSeconds),
      [AWS_ENV.idleWaitSeconds]: String(this.idleWaitSeconds),
      [AWS_ENV.metricsNamespace]: METRICS_NAMESPACE,
    };
  }

  private createHostFunctions(props: DeliveryPipelineProps, retention: RetentionDays, tracing: boolean) {
    const environment = this.hostEnvironment(props);
    const hostFunction = (
      fid: string,
      path: string,
      description: string,
      timeout: Duration,
      sizing: FunctionSizing | undefined,
      role: HostFunctionRole,
    ) => {
      const f = new HostFunction(this, fid, {
        logRetention: retention,
        removalPolicy: props.removalPolicy,
        entry: lambdaEntry(path),
        description,
        timeout,
        memorySize: sizing?.memorySize ?? HOST_FUNCTION_MEMORY_MB[role],
        reservedConcurrentExecutions: sizing?.reservedConcurrentExecutions,
        tracing,
        environment,
      });
      props.table.bind(f.fn);
      return f;
    };

    const step = hostFunction(
      'StepFunction',
      'entries/dispatcher-step.ts',
      'Takoform dispatcher steps (AcquireSlot, RecoverBatch, HandOver)',
      Duration.seconds(60),
      props.functions?.step,
      'step',
    );
    const batchHost = hostFunction(
      'BatchHostFunction',
      'entries/batch-host.ts',
      'Takoform batch host (register, settle, finalize, deadLetter, produce)',
      Duration.seconds(60),
      props.functions?.batchHost,
      'batchHost',
    );
    const executor = hostFunction(
      'ExecutorFunction',
      'entries/executor.ts',
      'Takoform Operation executor',
      Duration.minutes(5),
      props.functions?.executor,
      'executor',
    );
    const supervisor = hostFunction(
      'SupervisorFunction',
      'entries/supervisor.ts',
      'Takoform dispatcher supervisor',
      Duration.minutes(2),
      props.functions?.supervisor,
      'supervisor',
    );
    return { step, batchHost, executor, supervisor };
  }

  /**
   * Queues are created at run time, so their encryption, TLS-only policy and tags travel to the
   * executor (the one function that creates and updates them) as configuration.
   */
  private configureQueueCreation(props: DeliveryPipelineProps): void {
    const executor = this.executorFunction.fn;
    executor.addEnvironment(
      AWS_ENV.queueArnPrefix,
      Stack.of(this).formatArn({ service: 'sqs', resource: '', arnFormat: ArnFormat.NO_RESOURCE_NAME }),
    );
    if (props.queueEncryptionKey)
      executor.addEnvironment(AWS_ENV.queueKmsKey, props.queueEncryptionKey.keyArn);
    if (props.queueTags && Object.keys(props.queueTags).length > 0) {
      executor.addEnvironment(AWS_ENV.queueTags, JSON.stringify(props.queueTags));
    }
  }

  /** One dispatcher state machine of `kind`, which may invoke the step function and the workers. */
  private createDispatcher(cid: string, name: string, kind: LaneKind, tracing: boolean): StateMachine {
    const machine = new StateMachine(this, cid, {
      // Named, so the functions that start lanes know its ARN without a reference cycle (the
      // definition names the step function, and the step function starts lanes).
      stateMachineName: name,
      comment: `Takoform QueueConsumer dispatcher (${kind})`,
      definitionBody: DefinitionBody.fromString(
        Stack.of(this).toJsonString(
          dispatcherDefinition({ stepFunction: this.stepFunction.fn.functionArn }, kind),
        ),
      ),
      stateMachineType: kind === 'express' ? StateMachineType.EXPRESS : StateMachineType.STANDARD,
      // Errors only and no execution data: slots (queue URLs, receipt-free ids) pass through
      // every state, and ALL would log each transition of every batch.
      logs: { destination: this.stateMachineLogs, level: LogLevel.ERROR, includeExecutionData: false },
      tracingEnabled: tracing,
    });
    if (!tracing) {
      Validations.of(machine).acknowledge({
        id: 'AwsSolutions-SF2',
        reason: 'X-Ray tracing is turned off on purpose by the tracing prop of the Host.',
      });
    }
    machine.addToRolePolicy(
      new iam.PolicyStatement({
        sid: 'InvokeDispatcherSteps',
        actions: ['lambda:InvokeFunction'],
        resources: [this.stepFunction.fn.functionArn],
      }),
    );
    machine.addToRolePolicy(
      new iam.PolicyStatement({
        sid: 'InvokeWorkerFunctions',
        actions: ['lambda:InvokeFunction'],
        resources: [this.workerFunctionArnPattern()],
      }),
    );
    this.acknowledgeFindings(machine);
    return machine;
  }

  /** The safety net: the executor and the supervisor run every minute. */
  private scheduleSafetyNet(): void {
    for (const [rid, fn, description] of [
      ['ExecutorSchedule', this.executorFunction.fn, 'Runs due Takoform Operations every minute'],
      ['SupervisorSchedule', this.supervisorFunction.fn, 'Keeps Takoform dispatchers running every minute'],
    ] as const) {
      new Rule(this, rid, {
        description,
        schedule: Schedule.rate(Duration.minutes(1)),
        targets: [new LambdaFunction(fn, { retryAttempts: 0 })],
      });
    }
  }

  /** `arn:…:lambda:<region>:<account>:function:<workerFunctionNamePrefix>*`. */
  workerFunctionArnPattern(): string {
    return Stack.of(this).formatArn({
      service: 'lambda',
      resource: 'function',
      resourceName: `${this.workerFunctionNamePrefix}*`,
      arnFormat: ArnFormat.COLON_RESOURCE_NAME,
    });
  }

  /**
   * With a customer-managed queue key: what SQS needs of the caller's key rights to send
   * (GenerateDataKey, Decrypt) or to receive (Decrypt). Nothing without one.
   */
  grantQueueKey(grantee: iam.IGrantable, use: 'send' | 'receive'): void {
    const key = this.queueEncryptionKey;
    if (!key) return;
    grantKeyUse(grantee, key, use === 'send' ? ['kms:GenerateDataKey', 'kms:Decrypt'] : ['kms:Decrypt']);
  }

  /** Lets `fn` call `actions` on the Host's queues (by name prefix) and nothing else of SQS. */
  grantQueues(fn: LambdaFn, actions: readonly string[]): void {
    fn.addToRolePolicy(new iam.PolicyStatement({ actions: [...actions], resources: [this.queueArnPattern] }));
    if (fn.role) {
      Validations.of(fn.role).acknowledge({
        id: `AwsSolutions-IAM5[Resource::${nagResource(this, this.queueArnPattern)}]`,
        reason:
          'Queues are created at run time, one per queue Resource, named <prefix><uid>: the prefix is the narrowest scope.',
      });
    }
  }

  /**
   * The function producers outside the Host invoke after a send (`lambdaWake`), created with the
   * first grant (`TakoformHost.grantProduce`): a Host without such producers has none. Its events
   * are worth a minute at most — by then the supervisor's round has seen the messages — so Lambda
   * neither keeps nor retries them longer. No reserved concurrency: a throttled wake only delays
   * a lane to the supervisor's round.
   */
  get wakeFunction(): HostFunction {
    if (this.wake) return this.wake;
    const { retention, tracing, props } = this.wakeProps;
    const f = new HostFunction(this, 'WakeFunction', {
      logRetention: retention,
      removalPolicy: props.removalPolicy,
      entry: lambdaEntry('entries/wake.ts'),
      description: 'Takoform wake: starts a lane after a send by the producer client',
      timeout: Duration.seconds(10),
      memorySize: props.functions?.wake?.memorySize ?? HOST_FUNCTION_MEMORY_MB.step,
      reservedConcurrentExecutions: props.functions?.wake?.reservedConcurrentExecutions,
      tracing,
      environment: this.hostEnvironment(props),
    });
    f.fn.configureAsyncInvoke({ maxEventAge: Duration.seconds(60), retryAttempts: 0 });
    props.table.bind(f.fn);
    this.grantStartLanes(f);
    this.wake = f;
    return f;
  }

  /** Lets a Host function start dispatcher lanes (the two ARNs + states:StartExecution on them). */
  private grantStartLanes(f: HostFunction): void {
    f.fn.addEnvironment(AWS_ENV.dispatcherArn, this.dispatcherArn);
    f.fn.addEnvironment(AWS_ENV.dispatcherExpressArn, this.expressDispatcherArn);
    f.role.addToPrincipalPolicy(
      new iam.PolicyStatement({
        sid: 'StartDispatcherLanes',
        actions: ['states:StartExecution'],
        resources: [this.dispatcherArn, this.expressDispatcherArn],
      }),
    );
  }

  /**
   * The API function: triggers the executor after an acceptance (asynchronous invoke of the
   * unqualified function only) and sends through the HTTP producer extension.
   */
  bindApi(api: HostFunction): void {
    this.grantStartLanes(api);
    this.grantQueues(api.fn, SQS_ACTIONS.api);
    this.grantQueueKey(api.fn, 'send');
    api.fn.addEnvironment(AWS_ENV.executorFunction, this.executorFunction.fn.functionArn);
    api.fn.addEnvironment(AWS_ENV.queuePrefix, this.queueNamePrefix);
    api.fn.addEnvironment(AWS_ENV.hostName, this.hostName);
    api.fn.addEnvironment(AWS_ENV.idleWaitSeconds, String(this.idleWaitSeconds));
    api.fn.addEnvironment(AWS_ENV.metricsNamespace, METRICS_NAMESPACE);
    // The oldest message age in the operator's queue stats (SQS's own CloudWatch metric).
    this.grantMetricsRead('ApiMetricsRead', api.role);
    api.fn.addToRolePolicy(
      new iam.PolicyStatement({
        sid: 'TriggerExecutor',
        actions: ['lambda:InvokeFunction'],
        resources: [this.executorFunction.fn.functionArn],
      }),
    );
  }

  /** SQS's own metrics (the oldest message age) for one role. */
  private grantMetricsRead(id: string, role: iam.IRole): void {
    const policy = new iam.Policy(this, id, {
      roles: [role],
      statements: [new iam.PolicyStatement({ actions: ['cloudwatch:GetMetricData'], resources: ['*'] })],
    });
    Validations.of(policy).acknowledge({
      id: 'AwsSolutions-IAM5[Resource::*]',
      reason: 'cloudwatch:GetMetricData does not support resource-level permissions; it only reads metrics.',
    });
  }

  private acknowledgeFindings(machine: StateMachine): void {
    const role = machine.role;
    const workerArn = `Resource::${nagResource(this, this.workerFunctionArnPattern())}`;
    Validations.of(role).acknowledge(
      {
        id: `AwsSolutions-IAM5[${workerArn}]`,
        reason:
          'The dispatcher invokes the worker function named in each slot; ModuleWorkerFunction names every worker with this prefix.',
      },
      {
        id: 'AwsSolutions-IAM5[Resource::*]',
        reason:
          'Step Functions log delivery (logs:*LogDelivery, DescribeLogGroups…) and X-Ray tracing actions do not support resource-level permissions.',
      },
    );
    Validations.of(machine).acknowledge({
      id: 'AwsSolutions-SF1',
      reason:
        'Logs ERROR events without execution data: ALL would log every transition of every batch; history stays in Step Functions.',
    });
  }
}
