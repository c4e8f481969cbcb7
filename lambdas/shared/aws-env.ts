/**
 * Environment variable names shared by the CDK constructs (which set them) and the Lambda entries
 * (which read them once at cold start). Pure data, no imports: safe to load from CDK code and from
 * bundled Lambda code alike.
 */
export const AWS_ENV = {
  /** The Host table (see table-schema.ts: `TAKOFORM_TABLE`). */
  table: 'TAKOFORM_TABLE',
  /** SQS queue names are `<prefix><uid>`; IAM is scoped to `<prefix>*`. Ends with `-`. */
  queuePrefix: 'TAKOFORM_QUEUE_PREFIX',
  publicOrigin: 'TAKOFORM_PUBLIC_ORIGIN',
  /** The bound on one worker invocation, in seconds (the Host's slot deadlines derive from it). */
  workerTimeoutSeconds: 'TAKOFORM_WORKER_TIMEOUT_SECONDS',
  /** How long a lane long-polls an empty queue before it rests (0..20). */
  idleWaitSeconds: 'TAKOFORM_IDLE_WAIT_SECONDS',
  /** The executor function the API triggers after an acceptance (API function only). */
  executorFunction: 'TAKOFORM_EXECUTOR_FUNCTION',
  /** The dispatcher state machine (supervisor only). */
  dispatcherArn: 'TAKOFORM_DISPATCHER_ARN',
  /** The batch-host function worker runtimes call (worker functions only). */
  batchHostFunction: 'TAKOFORM_BATCH_HOST_FUNCTION',
  /** A worker function's `{vars, queueProducers}` as JSON (worker functions only). */
  workerConfig: 'TAKOFORM_WORKER_CONFIG',
  /** Powertools: the service name in logs and the metrics namespace. */
  serviceName: 'POWERTOOLS_SERVICE_NAME',
  metricsNamespace: 'POWERTOOLS_METRICS_NAMESPACE',
} as const;

/** The CloudWatch namespace of the Host's own metrics (EMF, through Powertools). */
export const METRICS_NAMESPACE = 'Takoform';

/** Custom metric names: emitted by the Lambda entries, alarmed on by the Observability construct. */
export const HOST_METRICS = {
  /** Executor: Operations in `reconciling` for longer than the stuck threshold (gauge). */
  operationsStuckReconciling: 'OperationsStuckReconciling',
  /** Executor: Operations in `reconciling` (gauge). */
  operationsReconciling: 'OperationsReconciling',
  /** Executor: Operation steps run by one invocation. */
  operationSteps: 'OperationSteps',
  /** Batch host: batches whose handler threw or was cut off (count). */
  workerBatchFailures: 'WorkerBatchFailures',
  /** Batch host: batches finalised (count). */
  batchesFinalized: 'BatchesFinalized',
  /** Batch host: messages moved to a dead-letter queue (count). */
  messagesDeadLettered: 'MessagesDeadLettered',
  /** Supervisor: messages waiting in the dead-letter queues of active consumers (gauge). */
  deadLetterMessages: 'DeadLetterMessages',
  /** Supervisor: the oldest message age over the Host's queues, from SQS's own metric (gauge). */
  oldestMessageAgeSeconds: 'OldestMessageAgeSeconds',
  /** Supervisor: messages waiting in consumed queues (gauge). */
  backlogMessages: 'BacklogMessages',
  /** Supervisor: dispatcher executions started. */
  dispatcherStarts: 'DispatcherStarts',
} as const;

/**
 * SQS metrics of every queue of this Host, as a CloudWatch search expression: the queue name
 * prefix is matched as a phrase of QueueName tokens. Used by the dashboard and, through
 * GetMetricData, by the supervisor (alarms cannot watch a SEARCH expression directly).
 */
export function sqsSearchExpression(
  queueNamePrefix: string,
  metricName: string,
  stat: string,
  periodSeconds: number,
): string {
  const phrase = queueNamePrefix.replace(/-+$/, '');
  return `SEARCH('{AWS/SQS,QueueName} MetricName="${metricName}" QueueName:"${phrase}"', '${stat}', ${periodSeconds})`;
}
