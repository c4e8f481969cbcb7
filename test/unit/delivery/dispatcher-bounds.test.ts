/**
 * The dispatcher definition stays inside Step Functions' limits by construction (issue 12): run
 * under the local stand-in with AWS's 25,000-event history cap on, with Task handlers that fail
 * the way Lambda does.
 */
import { describe, expect, it } from 'vitest';
import {
  DISPATCHER_TASKS,
  dispatcherDefinition,
  dispatcherInput,
  ROUNDS_PER_EXECUTION,
} from '../../../lambdas/delivery/dispatcher-definition.ts';
import { LocalStateMachine } from '../../../lambdas/local/standins/local-step-functions.ts';
import { laneAnswer } from '../../support/lane-answer.ts';

const definition = dispatcherDefinition({ stepFunction: 'arn:aws:lambda:local:000000000000:function:step' });
const named = (name: string) => Object.assign(new Error(name), { name });
/** Retries without AWS's backoff: the count of events is what is measured, not the time. */
const noBackoff = Object.fromEntries(Object.values(DISPATCHER_TASKS).map((t) => [t, 0]));
const slot = { batchId: 'b1', workerFunction: 'arn:aws:lambda:local:000000000000:function:worker' };

describe('dispatcher bounds', () => {
  it('an execution hands over after ROUNDS_PER_EXECUTION rounds, far below 25,000 events, even when every round uses up its Tasks’ retries', async () => {
    const machine = new LocalStateMachine(definition);
    let acquireCalls = 0;
    let invokeCalls = 0;
    let rounds = 0;
    const handovers: unknown[] = [];
    const execution = machine.start({
      name: 'busy-lane',
      input: dispatcherInput('c1', 1),
      retryIntervalOverrides: noBackoff,
      taskHandlers: {
        // Per round: 6 throttles (the Lambda retrier's budget), then 5 other failures (the step
        // retrier's), then a slot.
        [DISPATCHER_TASKS.acquire]: async (payload) => {
          const n = acquireCalls++ % 12;
          if (n < 6) throw named('Lambda.TooManyRequestsException');
          if (n < 11) throw named('Error');
          return laneAnswer(payload, { status: 'acquired', slot, held: 1, capacity: 1 });
        },
        // Per round: 5 throttles (the worker retrier's budget), then a batch.
        [DISPATCHER_TASKS.invoke]: async () => {
          if (invokeCalls++ % 6 < 5) throw named('Lambda.TooManyRequestsException');
          rounds++;
          return { idle: false, delivered: 10, batches: 1 };
        },
        [DISPATCHER_TASKS.recover]: async () => ({ recovered: true, waitSeconds: 0 }),
        [DISPATCHER_TASKS.handover]: async (payload) => {
          handovers.push(payload);
          return { handedOver: true };
        },
      },
    });
    await execution.result;
    expect(rounds).toBe(ROUNDS_PER_EXECUTION);
    expect(handovers).toEqual([{ action: 'handover', consumerUid: 'c1', generation: 1 }]);
    const { events, transitions } = execution.history();
    console.info(`worst-case execution: ${events} history events, ${transitions} transitions`);
    expect(events).toBeLessThan(12_500); // half of Standard's cap, with every retry used
    expect(machine.stats().failed).toBe(0);
  }, 60_000);

  it('a busy consumer ends the lane (no polling); a stop ends it too', async () => {
    for (const status of ['busy', 'stop']) {
      const machine = new LocalStateMachine(definition);
      let acquires = 0;
      const execution = machine.start({
        name: `lane-${status}`,
        input: dispatcherInput('c1', 1),
        taskHandlers: {
          [DISPATCHER_TASKS.acquire]: async (payload) => {
            acquires++;
            return laneAnswer(payload, { status });
          },
          [DISPATCHER_TASKS.invoke]: async () => ({}),
          [DISPATCHER_TASKS.recover]: async () => ({}),
          [DISPATCHER_TASKS.handover]: async () => ({}),
        },
      });
      await execution.result;
      expect(acquires).toBe(1);
      // ExecutionStarted, AcquireSlot (5), SlotTaken (2), LaneDone (2), ExecutionSucceeded.
      expect(execution.history().events).toBe(11);
    }
  });

  it('a failed invocation whose batch keeps its slot waits once, for that deadline, then takes a slot again', async () => {
    const machine = new LocalStateMachine(definition);
    const calls: string[] = [];
    let invokes = 0;
    const execution = machine.start({
      name: 'kept-slot',
      input: dispatcherInput('c1', 1),
      waitTimeOverrides: { WaitForKeptSlot: 20 },
      taskHandlers: {
        [DISPATCHER_TASKS.acquire]: async (payload) => {
          calls.push('acquire');
          return laneAnswer(payload, { status: 'acquired', slot, held: 1, capacity: 1 });
        },
        [DISPATCHER_TASKS.invoke]: async () => {
          calls.push('invoke');
          if (invokes++ === 0) throw named('States.Timeout');
          return { idle: true, delivered: 0, batches: 1 };
        },
        [DISPATCHER_TASKS.recover]: async (payload) => {
          calls.push(`recover:${(payload as { batchId: string }).batchId}`);
          return { recovered: true, waitSeconds: 900 };
        },
        [DISPATCHER_TASKS.handover]: async () => ({}),
      },
    });
    await execution.result;
    expect(calls).toEqual(['acquire', 'invoke', 'recover:b1', 'acquire', 'invoke']);
  });

  it('a lane whose Host steps fail past their retries ends that lane only (LaneFailed); its sibling runs on', async () => {
    const machine = new LocalStateMachine(definition);
    let siblingRounds = 0;
    const handlers = (broken: boolean) => ({
      [DISPATCHER_TASKS.acquire]: async (payload: unknown) => {
        if (broken) throw named('Error');
        return laneAnswer(payload, { status: 'acquired', slot, held: 1, capacity: 2 });
      },
      [DISPATCHER_TASKS.invoke]: async () => {
        siblingRounds++;
        return { idle: siblingRounds >= 3, delivered: 1, batches: 1 };
      },
      [DISPATCHER_TASKS.recover]: async () => ({ recovered: true, waitSeconds: 0 }),
      [DISPATCHER_TASKS.handover]: async () => ({}),
    });
    const broken = machine.start({
      name: 'broken',
      input: dispatcherInput('c1', 1),
      retryIntervalOverrides: noBackoff,
      taskHandlers: handlers(true),
    });
    const sibling = machine.start({
      name: 'sibling',
      input: dispatcherInput('c1', 1),
      taskHandlers: handlers(false),
    });
    const failure = await broken.result.then(
      () => undefined,
      (err: Error) => err,
    );
    expect(failure?.name).toBe('LaneFailed');
    await sibling.result;
    expect(siblingRounds).toBe(3);
  });
});
