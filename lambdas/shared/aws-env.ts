/**
 * Environment variable names shared by the CDK constructs (which set them) and the Lambda entries
 * (which read them once at cold start). Pure data, no imports: safe to load from CDK code and from
 * bundled Lambda code alike.
 */
export const AWS_ENV = {
  /** The Host table (see table-schema.ts: `TAKOFORM_TABLE`). */
  table: 'TAKOFORM_TABLE',
  /**
   * SQS queue names are `<prefix><uid>`; IAM is scoped to `<prefix>*`. On AWS the prefix is the
   * Host's name followed by `_`, a character no Host name has, so no other Host's prefix extends it.
   */
  queuePrefix: 'TAKOFORM_QUEUE_PREFIX',
  /** The Host's name (its queue name stem): the `host` dimension of every Host metric. */
  hostName: 'TAKOFORM_HOST_NAME',
  /** `arn:<partition>:sqs:<region>:<account>:`, for the TLS-only policy of the queues the Host creates. */
  queueArnPrefix: 'TAKOFORM_QUEUE_ARN_PREFIX',
  /** A customer-managed KMS key (ARN) for the queues the Host creates (else SQS-managed SSE). */
  queueKmsKey: 'TAKOFORM_QUEUE_KMS_KEY',
  /** Tags (a JSON object) for the queues the Host creates. */
  queueTags: 'TAKOFORM_QUEUE_TAGS',
  publicOrigin: 'TAKOFORM_PUBLIC_ORIGIN',
  /** The bound on one worker invocation, in seconds (the Host's slot deadlines derive from it). */
  workerTimeoutSeconds: 'TAKOFORM_WORKER_TIMEOUT_SECONDS',
  /** How long a lane long-polls an empty queue before it rests (0..20). */
  idleWaitSeconds: 'TAKOFORM_IDLE_WAIT_SECONDS',
  /** The executor function the API triggers after an acceptance (API function only). */
  executorFunction: 'TAKOFORM_EXECUTOR_FUNCTION',
  /** The dispatcher state machine (functions that start lanes). */
  dispatcherArn: 'TAKOFORM_DISPATCHER_ARN',
  /** The Express dispatcher state machine, for lanes that fit its window (functions that start lanes). */
  dispatcherExpressArn: 'TAKOFORM_DISPATCHER_EXPRESS_ARN',
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
/**
 * The dimension that tells Hosts apart: every Host metric carries `{service, host}`, so several
 * Hosts in one account and region write (and alarm on) separate series.
 */
export const HOST_DIMENSION = 'host';

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

/** The first character of every Resource uid (`engine/ids.ts`), hence of every queue name after the prefix. */
export const QUEUE_UID_LEAD = 'r';

/**
 * SQS metrics of this Host's queues, as a CloudWatch search expression. SEARCH matches tokens,
 * not prefixes: names split at every non-alphanumeric character and where digits start, and a
 * term like `takoform-host_r` matches those consecutive tokens (`takoform`, `host`, `r`) anywhere
 * in a QueueName. The uid's leading `r` ends the term, so a Host named `takoform-host-staging`
 * (tokens `takoform host staging r`) does not match; one whose name ends with this Host's name
 * (`eu-takoform-host`) would, which is why the supervisor's oldest-age read keeps only the
 * series whose queue name starts with the exact prefix (`hostQueuesOnly`).
 */
export function sqsSearchExpression(
  queueNamePrefix: string,
  metricName: string,
  stat: string,
  periodSeconds: number,
): string {
  if (!/^[a-z0-9_-]{1,49}$/.test(queueNamePrefix)) throw new Error('invalid queue name prefix');
  return `SEARCH('{AWS/SQS,QueueName} MetricName="${metricName}" QueueName=${queueNamePrefix}${QUEUE_UID_LEAD}', '${stat}', ${periodSeconds})`;
}

/** A GetMetricData label that CloudWatch replaces with each series' QueueName (a dynamic label). */
// biome-ignore lint/suspicious/noTemplateCurlyInString: CloudWatch fills in this label, not JavaScript.
export const QUEUE_NAME_LABEL = "${PROP('Dim.QueueName')}";

/**
 * The series of a search whose label (`QUEUE_NAME_LABEL`) is one of this Host's queue names: a
 * prefix comparison, exact where SEARCH is not.
 */
export function hostQueuesOnly<T extends { Label?: string | undefined }>(
  series: readonly T[],
  queueNamePrefix: string,
): T[] {
  return series.filter((s) => s.Label?.startsWith(queueNamePrefix) === true);
}
