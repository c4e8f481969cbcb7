/**
 * The dispatcher state machine, in Amazon States Language (JSONPath mode, so that the local runner
 * executes exactly what AWS runs). One execution drives one consumer generation: `lanes` run in
 * parallel, each taking a concurrency slot, running one batch through the worker and repeating
 * until the queue is idle. The slot map in DynamoDB — not the Map state — bounds concurrency, so
 * duplicate executions, retries and restarts never exceed maxConcurrency (DL-02).
 *
 * The CDK stack renders it with the step function's ARN; the local Host runs it under
 * aws-local-stepfunctions with the Task states mapped to the same handler functions.
 */
export interface DispatcherArns {
  /** The Host's dispatcher step Lambda (acquire, recover). */
  stepFunction: string;
}

/** Task state names: the local Host overrides exactly these. */
export const DISPATCHER_TASKS = {
  acquire: 'AcquireSlot',
  invoke: 'InvokeWorker',
  recover: 'RecoverBatch',
} as const;

/** Inline Map iterations AWS runs at once; a consumer with more lanes gets several executions. */
export const MAX_LANES_PER_EXECUTION = 40;

const lambdaRetry = [
  {
    ErrorEquals: [
      'Lambda.ServiceException',
      'Lambda.AWSLambdaException',
      'Lambda.SdkClientException',
      'Lambda.TooManyRequestsException',
    ],
    IntervalSeconds: 1,
    MaxAttempts: 6,
    BackoffRate: 2,
    JitterStrategy: 'FULL',
  },
];

/** Host steps are idempotent, so every failure may be retried; a lasting one ends the lane. */
const stepRetry = [
  { ErrorEquals: ['States.ALL'], IntervalSeconds: 1, MaxAttempts: 5, BackoffRate: 2, JitterStrategy: 'FULL' },
];

export function dispatcherDefinition(arns: DispatcherArns) {
  const step = (payload: Record<string, unknown>) => ({
    FunctionName: arns.stepFunction,
    Payload: payload,
  });
  return {
    Comment:
      'Takoform QueueConsumer dispatcher: lanes take a concurrency slot, run one batch, repeat until idle.',
    QueryLanguage: 'JSONPath',
    TimeoutSeconds: 86_400,
    StartAt: 'Lanes',
    States: {
      Lanes: {
        Type: 'Map',
        ItemsPath: '$.lanes',
        MaxConcurrencyPath: '$.laneCount',
        ItemSelector: {
          'consumerUid.$': '$.consumerUid',
          'generation.$': '$.generation',
          'lane.$': '$$.Map.Item.Value',
        },
        ItemProcessor: {
          ProcessorConfig: { Mode: 'INLINE' },
          StartAt: DISPATCHER_TASKS.acquire,
          States: {
            [DISPATCHER_TASKS.acquire]: {
              Type: 'Task',
              Resource: 'arn:aws:states:::lambda:invoke',
              Parameters: step({
                action: 'acquire',
                'consumerUid.$': '$.consumerUid',
                'generation.$': '$.generation',
              }),
              ResultSelector: { 'value.$': '$.Payload' },
              ResultPath: '$.acquire',
              Retry: [...lambdaRetry, ...stepRetry],
              Next: 'SlotTaken',
            },
            SlotTaken: {
              Type: 'Choice',
              Choices: [
                {
                  Variable: '$.acquire.value.status',
                  StringEquals: 'acquired',
                  Next: DISPATCHER_TASKS.invoke,
                },
                { Variable: '$.acquire.value.status', StringEquals: 'busy', Next: 'WaitForSlot' },
              ],
              Default: 'LaneDone',
            },
            WaitForSlot: { Type: 'Wait', Seconds: 1, Next: DISPATCHER_TASKS.acquire },
            [DISPATCHER_TASKS.invoke]: {
              Type: 'Task',
              Resource: 'arn:aws:states:::lambda:invoke',
              Parameters: {
                'FunctionName.$': '$.acquire.value.slot.workerFunction',
                Payload: { kind: 'takoform.queue-batch.v1', 'slot.$': '$.acquire.value.slot' },
              },
              ResultSelector: { 'value.$': '$.Payload' },
              ResultPath: '$.run',
              // Lambda runs at most 900 s; the runner bounds the handler by the worker timeout.
              TimeoutSeconds: 960,
              Catch: [
                { ErrorEquals: ['States.ALL'], ResultPath: '$.failure', Next: DISPATCHER_TASKS.recover },
              ],
              Next: 'Idle',
            },
            Idle: {
              Type: 'Choice',
              Choices: [{ Variable: '$.run.value.idle', BooleanEquals: true, Next: 'LaneDone' }],
              Default: DISPATCHER_TASKS.acquire,
            },
            [DISPATCHER_TASKS.recover]: {
              Type: 'Task',
              Resource: 'arn:aws:states:::lambda:invoke',
              Parameters: step({
                action: 'recover',
                'consumerUid.$': '$.consumerUid',
                'batchId.$': '$.acquire.value.slot.batchId',
              }),
              ResultSelector: { 'value.$': '$.Payload' },
              ResultPath: null,
              Retry: [...lambdaRetry, ...stepRetry],
              Next: DISPATCHER_TASKS.acquire,
            },
            LaneDone: { Type: 'Succeed' },
          },
        },
        ResultPath: null,
        End: true,
      },
    },
  };
}

/** The input of one execution: which consumer generation, and how many lanes it runs. */
export function dispatcherInput(consumerUid: string, generation: number, lanes: number) {
  return {
    consumerUid,
    generation,
    laneCount: lanes,
    lanes: Array.from({ length: lanes }, (_, i) => i),
  };
}

/** The dispatcher step Lambda's actions (what AcquireSlot and RecoverBatch send). */
export type DispatcherStepInput =
  | { action: 'acquire'; consumerUid: string; generation: number }
  | { action: 'recover'; consumerUid: string; batchId: string };
