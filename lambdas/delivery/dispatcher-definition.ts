/**
 * The dispatcher state machine, in Amazon States Language (JSONPath mode, so that the local runner
 * executes exactly what AWS runs). One execution is one *lane* of one consumer generation: it
 * takes a concurrency slot, runs batches through the worker, and repeats until the queue is idle.
 * The control loop (`control-loop.ts`) decides when lanes start; the slot map in DynamoDB — not
 * the number of executions — bounds concurrency, so duplicate executions, retries and restarts
 * never exceed maxConcurrency (DL-02). Lanes are separate executions, so one lane's lasting
 * failure ends that lane only, and no Map limit caps how many run.
 *
 * Every execution is bounded: it hands over to a successor after `ROUNDS_PER_EXECUTION` rounds,
 * never polls (a lane that finds every slot taken ends; a lane whose batch keeps its slot after a
 * failed invocation waits once, for that slot's deadline), and every Task's retries are bounded.
 *
 * The CDK stack renders it with the step function's ARN; the local Host runs it in process
 * (`local/standins/local-step-functions.ts`) with the Task states mapped to the same functions.
 */
import { EXPRESS_MAX_MS, type LaneKind } from './lane-kinds.ts';

export interface DispatcherArns {
  /** The Host's dispatcher step Lambda (acquire, recover, hand over). */
  stepFunction: string;
}

/**
 * Rounds one execution runs before it hands over. A round is 4 transitions and at most ~14
 * history events (AcquireSlot 5, SlotTaken 2, InvokeWorker 5, Continue 2) and, in the worst
 * case, every Task's retries and a recovery on top (~90 more); 100 rounds stay below 11,000 of
 * Standard's 25,000 events whatever fails.
 */
export const ROUNDS_PER_EXECUTION = 100;

/** Task state names: the local Host overrides exactly these. */
export const DISPATCHER_TASKS = {
  acquire: 'AcquireSlot',
  invoke: 'InvokeWorker',
  recover: 'RecoverBatch',
  handover: 'HandOver',
} as const;

/**
 * Lambda's own failures of an invoke. Throttling (`TooManyRequestsException`, the account's or
 * the function's concurrency) means the function did not run; for the others it may have, which
 * is safe to retry: a second runner with the same slot is refused at registration and gives back
 * what it received.
 */
const LAMBDA_ERRORS = [
  'Lambda.TooManyRequestsException',
  'Lambda.ServiceException',
  'Lambda.AWSLambdaException',
  'Lambda.SdkClientException',
  'Lambda.EC2ThrottledException',
  'Lambda.ResourceNotReadyException',
];

const lambdaRetry = [
  {
    ErrorEquals: LAMBDA_ERRORS,
    IntervalSeconds: 1,
    MaxAttempts: 6,
    BackoffRate: 2,
    MaxDelaySeconds: 20,
    JitterStrategy: 'FULL',
  },
];

/**
 * Worker invokes: retried with backoff and full jitter for at most ~25 s, well inside the slot's
 * gathering deadline (idle wait + batch timeout + 30 s), after which the slot would be recovered.
 */
const workerRetry = [
  {
    ErrorEquals: LAMBDA_ERRORS,
    IntervalSeconds: 1,
    MaxAttempts: 5,
    BackoffRate: 2,
    MaxDelaySeconds: 8,
    JitterStrategy: 'FULL',
  },
];

/** Host steps are idempotent, so every failure may be retried; a lasting one ends the lane. */
const stepRetry = [
  { ErrorEquals: ['States.ALL'], IntervalSeconds: 1, MaxAttempts: 5, BackoffRate: 2, JitterStrategy: 'FULL' },
];

/**
 * The definition of one kind of lane (`lane-kinds.ts`). Both kinds run the same states; an
 * Express lane also tells AcquireSlot when its execution started (so the step takes a slot only
 * while a whole batch fits the five-minute window, and hands the lane over otherwise) and tells
 * the runner when its window ends (`laneUntil`), and it never waits for a kept slot (a wait of up
 * to an hour does not fit): it ends, and the slot is recovered at its deadline by whoever comes
 * next (AcquireSlot, a registration, the supervisor's minute).
 */
export function dispatcherDefinition(arns: DispatcherArns, kind: LaneKind = 'standard') {
  const express = kind === 'express';
  const step = (payload: Record<string, unknown>) => ({
    FunctionName: arns.stepFunction,
    Payload: payload,
  });
  const lane = { 'consumerUid.$': '$.consumerUid', 'generation.$': '$.generation' };
  return {
    Comment: express
      ? 'Takoform QueueConsumer dispatcher lane (Express): take a concurrency slot, run batches, repeat until idle; hand over before the five-minute window ends.'
      : 'Takoform QueueConsumer dispatcher lane: take a concurrency slot, run batches, repeat until idle; hand over after a bounded number of rounds.',
    QueryLanguage: 'JSONPath',
    // Standard: a round lasts at most the worker invocation (960 s) or the wait for a kept slot
    // (3,600 s). Express: AWS's limit.
    TimeoutSeconds: express ? EXPRESS_MAX_MS / 1000 : 86_400 * 7,
    StartAt: DISPATCHER_TASKS.acquire,
    States: {
      // The lane's state is rebuilt from the step's answer (`laneAfterAcquire`): the step counts
      // the round and drops what only the first round uses (`inherit`, `startAfter`), so no Pass
      // or Choice state runs per round for that — each state entered is a billed transition. The
      // whole state goes to the step (`lane.$: '$'`), so an input of any Host version resolves.
      [DISPATCHER_TASKS.acquire]: {
        Type: 'Task',
        Resource: 'arn:aws:states:::lambda:invoke',
        Parameters: step({
          action: 'acquire',
          'lane.$': '$',
          // Names the round's slot: a retry of this state after a lost answer finds the slot
          // its first try took rather than taking a second one.
          execution: { 'id.$': '$$.Execution.Id', 'startTime.$': '$$.Execution.StartTime' },
          ...(express ? { 'startedAt.$': '$$.Execution.StartTime' } : {}),
        }),
        ResultSelector: {
          'consumerUid.$': '$.Payload.lane.consumerUid',
          'generation.$': '$.Payload.lane.generation',
          'round.$': '$.Payload.lane.round',
          'inherit.$': '$.Payload.lane.inherit',
          acquire: { 'value.$': '$.Payload' },
        },
        // No ResultPath: the default ($) replaces the state with the selected result.
        Retry: [...lambdaRetry, ...stepRetry],
        Catch: [{ ErrorEquals: ['States.ALL'], ResultPath: '$.failure', Next: 'LaneFailed' }],
        Next: 'SlotTaken',
      },
      SlotTaken: {
        Type: 'Choice',
        Choices: [
          { Variable: '$.acquire.value.status', StringEquals: 'acquired', Next: DISPATCHER_TASKS.invoke },
          // A lane started for messages hidden until a time (a retry delay) waits for it first.
          { Variable: '$.acquire.value.status', StringEquals: 'wait', Next: 'WaitToStart' },
        ],
        // `busy`: every slot is held by a lane that will take the next one itself; `stop`.
        Default: 'LaneDone',
      },
      WaitToStart: {
        Type: 'Wait',
        SecondsPath: '$.acquire.value.waitSeconds',
        Next: DISPATCHER_TASKS.acquire,
      },
      [DISPATCHER_TASKS.invoke]: {
        Type: 'Task',
        Resource: 'arn:aws:states:::lambda:invoke',
        Parameters: {
          'FunctionName.$': '$.acquire.value.slot.workerFunction',
          Payload: {
            kind: 'takoform.queue-batch.v1',
            'slot.$': '$.acquire.value.slot',
            // The runner starts a batch only while a whole one ends before this.
            ...(express ? { 'laneUntil.$': '$.acquire.value.laneUntil' } : {}),
          },
        },
        ResultSelector: { 'value.$': '$.Payload' },
        ResultPath: '$.run',
        // Lambda runs at most 900 s; the runner bounds the handler by the worker timeout.
        TimeoutSeconds: 960,
        Retry: workerRetry,
        Catch: [{ ErrorEquals: ['States.ALL'], ResultPath: '$.failure', Next: DISPATCHER_TASKS.recover }],
        Next: 'Continue',
      },
      Continue: {
        Type: 'Choice',
        Choices: [
          { Variable: '$.run.value.idle', BooleanEquals: true, Next: 'LaneDone' },
          {
            Variable: '$.round',
            NumericGreaterThanEquals: ROUNDS_PER_EXECUTION,
            Next: DISPATCHER_TASKS.handover,
          },
        ],
        Default: DISPATCHER_TASKS.acquire,
      },
      [DISPATCHER_TASKS.recover]: {
        Type: 'Task',
        Resource: 'arn:aws:states:::lambda:invoke',
        Parameters: step({
          action: 'recover',
          'consumerUid.$': '$.consumerUid',
          'batchId.$': '$.acquire.value.slot.batchId',
          // A runner whose handler ended says so in its error (unfinished-batch.ts).
          'failure.$': '$.failure',
          // An Express lane does not wait for a kept slot: a Standard lane of its generation does.
          ...(express ? { express: { 'generation.$': '$.generation' } } : {}),
        }),
        ResultSelector: { 'value.$': '$.Payload' },
        ResultPath: '$.recovered',
        Retry: [...lambdaRetry, ...stepRetry],
        Catch: [{ ErrorEquals: ['States.ALL'], ResultPath: '$.failure', Next: 'LaneFailed' }],
        Next: 'AfterRecovery',
      },
      AfterRecovery: {
        Type: 'Pass',
        // The round was counted when its slot was taken; `run` says the lane goes on.
        Parameters: {
          ...lane,
          'round.$': '$.round',
          inherit: {},
          run: { value: { idle: false } },
          'waitSeconds.$': '$.recovered.value.waitSeconds',
        },
        Next: 'WaitForKeptSlot',
      },
      // Once, for the deadline of the slot a failed invocation keeps (0 s when none is kept).
      WaitForKeptSlot: express
        ? {
            Type: 'Choice',
            Choices: [{ Variable: '$.waitSeconds', NumericGreaterThan: 0, Next: 'LaneDone' }],
            Default: 'Continue',
          }
        : { Type: 'Wait', SecondsPath: '$.waitSeconds', Next: 'Continue' },
      [DISPATCHER_TASKS.handover]: {
        Type: 'Task',
        Resource: 'arn:aws:states:::lambda:invoke',
        Parameters: step({ action: 'handover', ...lane }),
        ResultPath: null,
        Retry: [...lambdaRetry, ...stepRetry],
        // Without a successor the supervisor starts lanes for what is left.
        Catch: [{ ErrorEquals: ['States.ALL'], ResultPath: '$.failure', Next: 'LaneDone' }],
        Next: 'LaneDone',
      },
      LaneDone: { Type: 'Succeed' },
      // A lasting failure of the Host's steps ends this lane only; the supervisor restarts lanes.
      LaneFailed: { Type: 'Fail', Error: 'LaneFailed', Cause: 'a Host step failed after its retries' },
    },
  };
}

/** The input of one lane execution; `startAfter` (seconds) delays its first AcquireSlot. */
export function dispatcherInput(
  consumerUid: string,
  generation: number,
  round = 0,
  startAfter?: number,
  inherit?: Record<string, unknown>,
) {
  return {
    consumerUid,
    generation,
    round,
    idle: false,
    inherit: inherit ?? {},
    ...(startAfter !== undefined ? { startAfter } : {}),
  };
}
