/**
 * The local Step Functions stand-in (issue 12): AWS's history limit, StartExecution's name rules,
 * Task timeouts and Lambda-invoke payloads, on top of aws-local-stepfunctions.
 */

import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  DISPATCHER_TASKS,
  dispatcherDefinition,
  dispatcherInput,
} from '../../../lambdas/delivery/dispatcher-definition.ts';
import {
  CLOSED_NAME_RETENTION_MS,
  LocalStateMachine,
  withAwsTaskTimeouts,
} from '../../../lambdas/local/standins/local-step-functions.ts';
import { laneAnswer } from '../../support/lane-answer.ts';

const INVOKE = 'arn:aws:states:::lambda:invoke';
const task = (extra: Record<string, unknown>) => ({
  Type: 'Task',
  Resource: INVOKE,
  Parameters: { FunctionName: 'fn', 'Payload.$': '$' },
  ResultSelector: { 'value.$': '$.Payload' },
  ...extra,
});
const named = (name: string, message = name) => Object.assign(new Error(message), { name });
const rejectionOf = (p: Promise<unknown>) =>
  p.then(
    () => {
      throw new Error('expected a rejection');
    },
    (err: Error) => err,
  );

afterEach(() => {
  vi.restoreAllMocks();
});

describe('LocalStateMachine', () => {
  it('a handler gets Parameters.Payload and returns the Lambda payload; an Error named Lambda.TooManyRequestsException is matched by Retry', async () => {
    const machine = new LocalStateMachine({
      StartAt: 'Call',
      States: {
        Call: task({
          Retry: [
            {
              ErrorEquals: ['Lambda.TooManyRequestsException'],
              IntervalSeconds: 1,
              MaxAttempts: 2,
              BackoffRate: 1,
            },
          ],
          ResultPath: '$.call',
          Next: 'Check',
        }),
        Check: {
          Type: 'Choice',
          Choices: [{ Variable: '$.call.value.ok', BooleanEquals: true, Next: 'Rest' }],
          Default: 'Broken',
        },
        Rest: { Type: 'Wait', Seconds: 30, Next: 'Shape' },
        Shape: { Type: 'Pass', Next: 'Done' },
        Broken: { Type: 'Fail', Error: 'Broken' },
        Done: { Type: 'Succeed' },
      },
    });
    const received: unknown[] = [];
    const execution = machine.start({
      name: 'retry-1',
      input: { n: 1 },
      waitTimeOverrides: { Rest: 1 },
      taskHandlers: {
        Call: async (payload) => {
          received.push(payload);
          if (received.length <= 2) throw named('Lambda.TooManyRequestsException', 'Rate Exceeded.');
          // Not JSON-safe on purpose: the payload crosses the wire as JSON.
          return { ok: true, at: new Date(0), gone: undefined };
        },
      },
    });
    expect(await execution.result).toEqual({
      n: 1,
      call: { value: { ok: true, at: '1970-01-01T00:00:00.000Z' } },
    });
    expect(received).toEqual([{ n: 1 }, { n: 1 }, { n: 1 }]);
    // ExecutionStarted 1 + Task 5 + 2 retries × 3 + Choice 2 + Wait 2 + Pass 2 + Succeed 2 + ExecutionSucceeded 1.
    expect(execution.history()).toEqual({ events: 21, transitions: 7 });
    expect(machine.stats()).toEqual({ started: 1, failed: 0, maxHistoryEvents: 21, transitions: 7 });
  });

  it('an uncaught Task error rejects the result with its name; a caught one is counted once; Map iterations are counted', async () => {
    const machine = new LocalStateMachine({
      StartAt: 'Lanes',
      States: {
        Lanes: {
          Type: 'Map',
          ItemsPath: '$.lanes',
          ItemProcessor: {
            ProcessorConfig: { Mode: 'INLINE' },
            StartAt: 'Work',
            States: {
              Work: task({
                Catch: [{ ErrorEquals: ['States.ALL'], ResultPath: '$.failure', Next: 'Lane' }],
                Next: 'Lane',
              }),
              Lane: { Type: 'Succeed' },
            },
          },
          ResultPath: null,
          Next: 'Last',
        },
        Last: task({ End: true }),
      },
    });
    const execution = machine.start({
      name: 'map-1',
      input: { lanes: [{ lane: 0 }, { lane: 1 }] },
      taskHandlers: {
        Work: async (lane) => {
          if ((lane as { lane: number }).lane === 1) throw named('Worker.Failed', 'lane 1 failed');
          return {};
        },
        Last: async () => {
          throw named('Custom.Error', 'the last step failed');
        },
      },
    });
    const err = await rejectionOf(execution.result);
    expect(err.name, err.message).toBe('Custom.Error');
    // As Lambda reports a function error to Step Functions: the Cause is its JSON.
    expect(JSON.parse(err.message)).toMatchObject({
      errorType: 'Custom.Error',
      errorMessage: 'the last step failed',
    });
    // 1 + Map 4 + 2 iterations × (2 + Task 5 + Succeed 2) + Last (Entered, Scheduled, Started, Failed) 4 + ExecutionFailed 1.
    expect(execution.history()).toEqual({ events: 28, transitions: 6 });
    expect(machine.stats()).toMatchObject({ started: 1, failed: 1 });
    expect(machine.running()).toEqual([]);
  });

  it('past historyLimit the execution is aborted and rejects with HistoryLimitExceeded, as AWS fails it', async () => {
    const machine = new LocalStateMachine(
      {
        StartAt: 'Step',
        States: {
          Step: task({ ResultPath: null, Next: 'Again' }),
          Again: {
            Type: 'Choice',
            Choices: [{ Variable: '$.stop', BooleanEquals: true, Next: 'End' }],
            Default: 'Step',
          },
          End: { Type: 'Succeed' },
        },
      },
      { historyLimit: 100 },
    );
    let calls = 0;
    const execution = machine.start({
      name: 'loop',
      input: { stop: false },
      taskHandlers: {
        Step: async () => {
          calls++;
          await new Promise((r) => setTimeout(r, 1));
          return {};
        },
      },
    });
    const err = await rejectionOf(execution.result);
    expect(err.name).toBe('HistoryLimitExceeded');
    const { events, transitions } = execution.history();
    expect(events).toBeGreaterThan(100);
    expect(events).toBeLessThan(110);
    // Each round is Task 5 + Choice 2 events and 2 transitions.
    expect(calls).toBe(Math.ceil((100 - 1) / 7));
    expect(transitions).toBe(2 * calls - 1);
    const after = calls;
    await new Promise((r) => setTimeout(r, 50));
    expect(calls).toBe(after);
    expect(machine.stats()).toMatchObject({ failed: 1, maxHistoryEvents: events });
  });

  it('Task TimeoutSeconds fails a hung handler with States.Timeout, which States.TaskFailed does not catch', async () => {
    const machine = new LocalStateMachine({
      StartAt: 'Hang',
      States: {
        Hang: task({
          TimeoutSeconds: 1,
          Catch: [{ ErrorEquals: ['States.TaskFailed'], Next: 'Caught' }],
          End: true,
        }),
        Caught: { Type: 'Succeed' },
      },
    });
    const started = Date.now();
    const execution = machine.start({
      name: 'hang',
      input: {},
      taskHandlers: { Hang: () => new Promise(() => {}) },
    });
    const err = await rejectionOf(execution.result);
    expect(err.name).toBe('States.Timeout');
    expect(Date.now() - started).toBeGreaterThanOrEqual(950);
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it('Task states without TimeoutSeconds get no 60 s timeout (AWS has no default), nested ones too', () => {
    const definition = dispatcherDefinition({
      stepFunction: 'arn:aws:lambda:local:000000000000:function:step',
    });
    const prepared = withAwsTaskTimeouts(definition) as typeof definition;
    const lane = prepared.States;
    expect(lane[DISPATCHER_TASKS.acquire]).toMatchObject({ TimeoutSeconds: 2_147_483 });
    expect(lane[DISPATCHER_TASKS.recover]).toMatchObject({ TimeoutSeconds: 2_147_483 });
    expect(lane[DISPATCHER_TASKS.handover]).toMatchObject({ TimeoutSeconds: 2_147_483 });
    // An explicit timeout is kept, and the caller's definition is not changed.
    expect(lane[DISPATCHER_TASKS.invoke]).toMatchObject({ TimeoutSeconds: 960 });
    expect(definition.States[DISPATCHER_TASKS.acquire]).not.toHaveProperty('TimeoutSeconds');
  });

  it('StartExecution name rules: idempotent for a running execution with the same input, ExecutionAlreadyExists otherwise, forgotten after 10 minutes', async () => {
    const machine = new LocalStateMachine({ StartAt: 'Work', States: { Work: task({ End: true }) } });
    let release: () => void = () => {};
    const gate = new Promise<void>((r) => {
      release = r;
    });
    const taskHandlers = { Work: () => gate.then(() => 'done') };
    const nameError = (fn: () => unknown) => {
      try {
        fn();
      } catch (err) {
        return (err as Error).name;
      }
      return 'no error';
    };
    expect(nameError(() => machine.start({ name: 'has space', input: {}, taskHandlers }))).toBe(
      'InvalidName',
    );
    expect(nameError(() => machine.start({ name: 'x'.repeat(81), input: {}, taskHandlers }))).toBe(
      'InvalidName',
    );
    expect(nameError(() => machine.start({ name: 'a', input: {}, taskHandlers: {} }))).toBe('Error');

    const first = machine.start({ name: 'lane-A_1', input: { a: 1 }, taskHandlers });
    expect(machine.start({ name: 'lane-A_1', input: { a: 1 }, taskHandlers })).toBe(first);
    expect(nameError(() => machine.start({ name: 'lane-A_1', input: { a: 2 }, taskHandlers }))).toBe(
      'ExecutionAlreadyExists',
    );
    expect(machine.running()).toEqual([first]);
    release();
    expect(await first.result).toEqual({ value: 'done' });
    expect(machine.running()).toEqual([]);
    expect(nameError(() => machine.start({ name: 'lane-A_1', input: { a: 1 }, taskHandlers }))).toBe(
      'ExecutionAlreadyExists',
    );
    expect(machine.stats().started).toBe(1);

    const now = Date.now();
    vi.spyOn(Date, 'now').mockReturnValue(now + CLOSED_NAME_RETENTION_MS + 1_000);
    const again = machine.start({ name: 'lane-A_1', input: { a: 1 }, taskHandlers });
    expect(again).not.toBe(first);
    expect(await again.result).toEqual({ value: 'done' });
    expect(machine.stats().started).toBe(2);
  });

  it('abort() ends a running execution: the result is null and it is no longer running', async () => {
    const machine = new LocalStateMachine({
      StartAt: 'Pause',
      States: { Pause: { Type: 'Wait', Seconds: 3600, End: true } },
    });
    const execution = machine.start({ name: 'paused', input: {}, taskHandlers: {} });
    expect(machine.running()).toHaveLength(1);
    execution.abort();
    expect(await execution.result).toBeNull();
    expect(machine.running()).toEqual([]);
    expect(machine.stats().failed).toBe(0);
  });

  it('a ResultPath of $ replaces the state with the result, as on AWS (the library alone nests it under "$")', async () => {
    const machine = new LocalStateMachine({
      StartAt: 'Work',
      States: {
        Work: task({ ResultSelector: { 'kept.$': '$.Payload.kept' }, ResultPath: '$', End: true }),
      },
    });
    const execution = machine.start({
      name: 'replace',
      input: { old: 1 },
      taskHandlers: { Work: async () => ({ kept: 2, dropped: 3 }) },
    });
    expect(await execution.result).toEqual({ kept: 2 });
  });

  it('runs the production dispatcher definition: a lane told to stop ends its execution', async () => {
    const machine = new LocalStateMachine(
      dispatcherDefinition({ stepFunction: 'arn:aws:lambda:local:000000000000:function:step' }),
    );
    const payloads: unknown[] = [];
    const step = async (payload: unknown) => {
      payloads.push(payload);
      return laneAnswer(payload, { status: 'stop' });
    };
    const execution = machine.start({
      name: 'consumer-1-g1',
      input: dispatcherInput('consumer-1', 1),
      taskHandlers: {
        [DISPATCHER_TASKS.acquire]: step,
        [DISPATCHER_TASKS.invoke]: step,
        [DISPATCHER_TASKS.recover]: step,
        [DISPATCHER_TASKS.handover]: step,
      },
    });
    await execution.result;
    // One AcquireSlot, with its resolved Parameters.Payload: the lane's whole state, and the
    // execution from the context object (it names the round's slot).
    expect(payloads).toEqual([
      {
        action: 'acquire',
        lane: dispatcherInput('consumer-1', 1),
        execution: {
          id: expect.stringMatching(/:execution:.*consumer-1-g1$/),
          startTime: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
        },
      },
    ]);
    // ExecutionStarted, AcquireSlot (5), SlotTaken (2), LaneDone (2), ExecutionSucceeded.
    expect(execution.history().events).toBe(11);
  });
});
