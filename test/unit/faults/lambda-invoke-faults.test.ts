/**
 * Faults for local Lambda invocations (issue 12): the worker, dispatcher step and batch host are
 * plain function calls locally, so nothing throttles, fails or hangs them unless
 * `withLambdaInvokeFaults` does — and the dispatcher's Retry/Catch and Task timeout must see the
 * same errors as on AWS.
 */

import { afterEach, describe, expect, it } from 'vitest';
import { DISPATCHER_TASKS, dispatcherDefinition } from '../../../lambdas/delivery/dispatcher-definition.ts';
import {
  FAULTS_ENV,
  type FaultConfig,
  lambdaCutOffFrom,
  parseFaultConfig,
} from '../../../lambdas/local/faults/fault-config.ts';
import { type InjectedFault, onInjectedFault } from '../../../lambdas/local/faults/fault-reports.ts';
import { withLambdaInvokeFaults } from '../../../lambdas/local/faults/invoke-faults.ts';
import { LocalStateMachine } from '../../../lambdas/local/standins/local-step-functions.ts';

const config = (localInvoke: FaultConfig['localInvoke'], seed = 3): FaultConfig => ({ seed, localInvoke });

/** Calls `n` times; what each call settled as (`ok`, or the error name), and how many times fn ran. */
async function calls(wrapped: (p: number) => Promise<number>, n: number) {
  const outcomes: string[] = [];
  for (let i = 0; i < n; i++)
    outcomes.push(
      await wrapped(i).then(
        () => 'ok',
        (err: Error) => err.name,
      ),
    );
  return outcomes;
}

const counting = () => {
  const ran: number[] = [];
  const fn = async (p: number) => {
    ran.push(p);
    return p * 2;
  };
  return { ran, fn };
};

let off: (() => void) | undefined;
afterEach(() => off?.());
const recordFaults = () => {
  const faults: InjectedFault[] = [];
  off = onInjectedFault((f) => faults.push(f));
  return faults;
};

describe('withLambdaInvokeFaults', () => {
  it('without localInvoke the function is returned as is; the section is validated', () => {
    const { fn } = counting();
    expect(withLambdaInvokeFaults(fn, 'worker', { seed: 1 })).toBe(fn);
    expect(withLambdaInvokeFaults(fn, 'worker', { seed: 1, lambda: { tooManyRequests: 1 } })).toBe(fn);
    const before = process.env[FAULTS_ENV];
    delete process.env[FAULTS_ENV];
    try {
      expect(withLambdaInvokeFaults(fn, 'step')).toBe(fn);
    } finally {
      if (before !== undefined) process.env[FAULTS_ENV] = before;
    }
    expect(() =>
      parseFaultConfig('{"seed":1,"localInvoke":{"timeout":2,"timeoutMs":0,"functions":{"wroker":{}}}}'),
    ).toThrow(
      /localInvoke.timeout: must be a number between 0 and 1.*localInvoke.timeoutMs: must be a positive integer/,
    );
    expect(() => parseFaultConfig('{"seed":1,"localInvoke":{"functions":{"wroker":{}}}}')).toThrow(
      /localInvoke.functions/,
    );
    expect(
      parseFaultConfig(
        '{"seed":1,"localInvoke":{"serviceError":0.1,"functions":{"batch-host":{"timeout":1}}}}',
      ),
    ).toEqual({ seed: 1, localInvoke: { serviceError: 0.1, functions: { 'batch-host': { timeout: 1 } } } });
  });

  it('a throttle throws Lambda.TooManyRequestsException and the function did not run', async () => {
    const faults = recordFaults();
    const { ran, fn } = counting();
    const wrapped = withLambdaInvokeFaults(fn, 'worker', config({ tooManyRequests: 1 }));
    expect(await calls(wrapped, 3)).toEqual(Array(3).fill('Lambda.TooManyRequestsException'));
    expect(ran).toEqual([]);
    expect(faults).toEqual(
      Array(3).fill(
        expect.objectContaining({
          label: 'worker',
          kind: 'tooManyRequests',
          ran: false,
          operation: 'Invoke',
        }),
      ),
    );
  });

  it('a service error throws Lambda.ServiceException, some before the function ran and some after', async () => {
    const faults = recordFaults();
    const { ran, fn } = counting();
    const wrapped = withLambdaInvokeFaults(fn, 'step', config({ serviceError: 1 }));
    expect(await calls(wrapped, 20)).toEqual(Array(20).fill('Lambda.ServiceException'));
    const after = faults.filter((f) => f.ran).length;
    expect(after).toBeGreaterThan(0);
    expect(after).toBeLessThan(20);
    // Exactly the calls reported as "ran" ran the function.
    expect(ran).toEqual(faults.flatMap((f, i) => (f.ran ? [i] : [])));
    // What the function itself threw (even synchronously) is lost with its answer.
    const throwing = withLambdaInvokeFaults(
      (() => {
        throw new Error('sync');
      }) as (p: number) => Promise<number>,
      'step',
      config({ serviceError: 1 }),
    );
    expect(await calls(throwing, 10)).toEqual(Array(10).fill('Lambda.ServiceException'));
  });

  it('a timeout lets the function run but never answers: Lambda.Timeout after timeoutMs, or never', async () => {
    const { ran, fn } = counting();
    const bounded = withLambdaInvokeFaults(fn, 'batch-host', config({ timeout: 1, timeoutMs: 50 }));
    const started = Date.now();
    expect(await calls(bounded, 1)).toEqual(['Lambda.Timeout']);
    expect(Date.now() - started).toBeGreaterThanOrEqual(45);
    expect(ran).toEqual([0]);

    const hanging = withLambdaInvokeFaults(fn, 'batch-host', config({ timeout: 1 }));
    const outcome = await Promise.race([
      hanging(7).then(
        () => 'settled',
        () => 'settled',
      ),
      new Promise((r) => setTimeout(() => r('still waiting'), 200)),
    ]);
    expect(outcome).toBe('still waiting');
    expect(ran).toEqual([0, 7]);
  });

  it('rates per function override the defaults; the same seed gives the same schedule, another seed another', async () => {
    const settings = {
      tooManyRequests: 0.3,
      serviceError: 0.2,
      functions: { worker: { tooManyRequests: 0 } },
    };
    const run = async (seed: number, label: 'worker' | 'step') =>
      calls(withLambdaInvokeFaults(counting().fn, label, config(settings, seed)), 40);
    const first = await run(5, 'step');
    expect(first).toContain('Lambda.TooManyRequestsException');
    expect(first).toContain('ok');
    expect(await run(5, 'step')).toEqual(first);
    expect(await run(6, 'step')).not.toEqual(first);
    expect(await run(5, 'worker')).not.toContain('Lambda.TooManyRequestsException');
  });

  it('under the local state machine a throttled worker is retried by the ASL Retry, and a hung one fails its Task with States.Timeout', async () => {
    const machine = new LocalStateMachine({
      StartAt: 'Invoke',
      States: {
        Invoke: {
          Type: 'Task',
          Resource: 'arn:aws:states:::lambda:invoke',
          Parameters: { FunctionName: 'worker', 'Payload.$': '$.n' },
          ResultSelector: { 'value.$': '$.Payload' },
          TimeoutSeconds: 1,
          Retry: [
            {
              ErrorEquals: ['Lambda.TooManyRequestsException'],
              IntervalSeconds: 1,
              MaxAttempts: 3,
              BackoffRate: 1,
            },
          ],
          Catch: [{ ErrorEquals: ['States.Timeout'], ResultPath: '$.failure', Next: 'TimedOut' }],
          End: true,
        },
        TimedOut: { Type: 'Pass', End: true },
      },
    });
    // The first invocation is throttled, the retry goes through.
    const { ran, fn } = counting();
    const throttling = withLambdaInvokeFaults(fn, 'worker', config({ tooManyRequests: 1 }));
    let invocations = 0;
    const throttledOnce = (p: number) => (++invocations === 1 ? throttling(p) : fn(p));
    const faults = recordFaults();
    const ok = machine.start({
      name: 'throttled',
      input: { n: 21 },
      taskHandlers: { Invoke: (p) => throttledOnce(p as number) },
    });
    expect(await ok.result).toEqual({ value: 42 });
    expect(faults.map((f) => f.kind)).toEqual(['tooManyRequests']);
    expect(ran).toEqual([21]);

    const hung = withLambdaInvokeFaults(fn, 'worker', config({ timeout: 1 }));
    const timedOut = machine.start({
      name: 'hung',
      input: { n: 1 },
      taskHandlers: { Invoke: (p) => hung(p as number) },
    });
    expect(await timedOut.result).toMatchObject({ n: 1, failure: { Error: 'States.Timeout' } });
  });

  it('an overlap lets the function run on while its caller sees Lambda.ServiceException or Lambda.SdkClientException', async () => {
    const faults = recordFaults();
    const ended: number[] = [];
    const slow = async (p: number) => {
      await new Promise((r) => setTimeout(r, 300));
      ended.push(p);
      return p;
    };
    const wrapped = withLambdaInvokeFaults(slow, 'worker', config({ overlap: 1, overlapAfterMs: 50 }));
    const started = Date.now();
    const outcomes = await calls(wrapped, 16);
    // Each caller heard its error within overlapAfterMs, long before the function ended...
    expect(Date.now() - started).toBeLessThan(16 * 300);
    expect(new Set(outcomes)).toEqual(new Set(['Lambda.ServiceException', 'Lambda.SdkClientException']));
    expect(faults.every((f) => f.kind === 'overlap' && f.ran === true)).toBe(true);
    // ...and every function ran to its end all the same.
    await new Promise((r) => setTimeout(r, 400));
    expect(ended.sort((a, b) => a - b)).toEqual([...Array(16).keys()]);
    // A function that ends sooner answers with the error at its end, not later.
    const quick = withLambdaInvokeFaults(
      counting().fn,
      'step',
      config({ overlap: 1, overlapAfterMs: 60_000 }),
    );
    const t = Date.now();
    expect((await calls(quick, 1))[0]).toMatch(/^Lambda\.(ServiceException|SdkClientException)$/);
    expect(Date.now() - t).toBeLessThan(5_000);
  });

  it('overlap, overlapAfterMs and lambdaCutOff are validated; the Lambda cut-off is on wherever localInvoke is set, unless turned off', () => {
    expect(
      parseFaultConfig(
        '{"seed":1,"localInvoke":{"overlap":0.05,"overlapAfterMs":0,"lambdaCutOff":false,"functions":{"step":{"overlap":0}}}}',
      ),
    ).toEqual({
      seed: 1,
      localInvoke: {
        overlap: 0.05,
        overlapAfterMs: 0,
        lambdaCutOff: false,
        functions: { step: { overlap: 0 } },
      },
    });
    expect(() =>
      parseFaultConfig('{"seed":1,"localInvoke":{"overlap":-1,"overlapAfterMs":1.5,"lambdaCutOff":"yes"}}'),
    ).toThrow(
      /localInvoke.overlap: must be a number between 0 and 1.*localInvoke.overlapAfterMs: must be a non-negative integer.*localInvoke.lambdaCutOff: must be true or false/,
    );
    expect(lambdaCutOffFrom(undefined)).toBe(false);
    expect(lambdaCutOffFrom({ seed: 1, dynamodb: { lostAnswer: 0.1 } })).toBe(false);
    expect(lambdaCutOffFrom({ seed: 1, localInvoke: {} })).toBe(true);
    expect(lambdaCutOffFrom({ seed: 1, localInvoke: { overlap: 0.1, lambdaCutOff: false } })).toBe(false);
  });

  it('DL-02 under the dispatcher definition an overlapping InvokeWorker is retried, so a second runner starts while the first still runs', async () => {
    const definition = dispatcherDefinition({ stepFunction: 'step' }, 'standard');
    const retried = (
      definition.States[DISPATCHER_TASKS.invoke] as { Retry: { ErrorEquals: string[] }[] }
    ).Retry.flatMap((r) => r.ErrorEquals);
    expect(retried).toEqual(expect.arrayContaining(['Lambda.ServiceException', 'Lambda.SdkClientException']));

    const machine = new LocalStateMachine(definition);
    const lane = { consumerUid: 'c', generation: 1, round: 1, inherit: {} };
    let running = 0;
    let most = 0;
    let runs = 0;
    const runner = async () => {
      runs++;
      running++;
      most = Math.max(most, running);
      await new Promise((r) => setTimeout(r, 2_500));
      running--;
      return { idle: true };
    };
    // Only the first invocation overlaps (its caller hears an error after at most 100 ms).
    const overlapping = withLambdaInvokeFaults(runner, 'worker', config({ overlap: 1, overlapAfterMs: 100 }));
    let invocations = 0;
    const faults = recordFaults();
    const execution = machine.start({
      name: 'overlap',
      input: { consumerUid: 'c', generation: 1, round: 0, idle: false, inherit: {} },
      taskHandlers: {
        [DISPATCHER_TASKS.acquire]: async () => ({
          status: 'acquired',
          slot: { batchId: 'b', workerFunction: 'worker' },
          lane,
        }),
        [DISPATCHER_TASKS.invoke]: () => (++invocations === 1 ? overlapping(undefined) : runner()),
        [DISPATCHER_TASKS.recover]: async () => {
          throw new Error('not expected: the overlap is retried, not caught');
        },
        [DISPATCHER_TASKS.handover]: async () => ({}),
      },
    });
    await execution.result;
    expect(faults.map((f) => f.kind)).toEqual(['overlap']);
    expect(runs).toBe(2);
    expect(most).toBe(2);
  });
});
