/**
 * Issue 13: the Express dispatcher runs the Standard one's states, with what its five-minute
 * window needs: AcquireSlot learns when the execution started, the worker invocation learns when
 * the window ends, and a lane never waits for a kept slot (RecoverBatch starts a Standard lane
 * that does). Run under the local stand-in, which ends an execution at its TimeoutSeconds.
 */
import { describe, expect, it } from 'vitest';
import {
  DISPATCHER_TASKS,
  dispatcherDefinition,
  dispatcherInput,
} from '../../../lambdas/delivery/dispatcher-definition.ts';
import { EXPRESS_MAX_MS } from '../../../lambdas/delivery/lane-kinds.ts';
import { LocalStateMachine } from '../../../lambdas/local/standins/local-step-functions.ts';
import { laneAnswer } from '../../support/lane-answer.ts';

const arns = { stepFunction: 'arn:aws:lambda:local:000000000000:function:step' };
const express = dispatcherDefinition(arns, 'express');
const standard = dispatcherDefinition(arns, 'standard');
const slot = { batchId: 'b1', workerFunction: 'arn:aws:lambda:local:000000000000:function:worker' };
const named = (name: string) => Object.assign(new Error(name), { name });

describe('the Express dispatcher', () => {
  it('has the Standard states, the five-minute timeout, and differs only in what the window needs', () => {
    expect(express.TimeoutSeconds).toBe(EXPRESS_MAX_MS / 1000);
    expect(Object.keys(express.States).sort()).toEqual(Object.keys(standard.States).sort());
    const differ = Object.keys(standard.States).filter(
      (k) =>
        JSON.stringify(standard.States[k as keyof typeof standard.States]) !==
        JSON.stringify(express.States[k as keyof typeof express.States]),
    );
    expect(differ.sort()).toEqual(
      [DISPATCHER_TASKS.acquire, DISPATCHER_TASKS.invoke, DISPATCHER_TASKS.recover, 'WaitForKeptSlot'].sort(),
    );
  });

  it('AcquireSlot gets the execution’s start; the worker invocation gets the window the step answered', async () => {
    const machine = new LocalStateMachine(express);
    const acquires: { startedAt?: string }[] = [];
    const invokes: unknown[] = [];
    const before = Date.now();
    const execution = machine.start({
      name: 'lane',
      input: dispatcherInput('c1', 1),
      taskHandlers: {
        [DISPATCHER_TASKS.acquire]: async (payload) => {
          acquires.push(payload as { startedAt?: string });
          return laneAnswer(payload, { status: 'acquired', slot, held: 1, capacity: 1, laneUntil: 12345 });
        },
        [DISPATCHER_TASKS.invoke]: async (payload) => {
          invokes.push(payload);
          return { idle: invokes.length >= 2, delivered: 1, batches: 1 };
        },
        [DISPATCHER_TASKS.recover]: async () => ({ recovered: true, waitSeconds: 0 }),
        [DISPATCHER_TASKS.handover]: async () => ({}),
      },
    });
    await execution.result;
    expect(acquires).toHaveLength(2);
    for (const a of acquires) {
      const t = Date.parse(a.startedAt ?? '');
      expect(t).toBeGreaterThanOrEqual(before - 1_000);
      expect(t).toBeLessThanOrEqual(Date.now());
    }
    // Both rounds' AcquireSlot see the same start: the execution's, not the round's.
    expect(acquires[0]?.startedAt).toBe(acquires[1]?.startedAt);
    expect(invokes).toEqual([
      { kind: 'takoform.queue-batch.v1', slot, laneUntil: 12345 },
      { kind: 'takoform.queue-batch.v1', slot, laneUntil: 12345 },
    ]);
    // The Standard dispatcher sends neither.
    const plain = new LocalStateMachine(standard);
    const sent: unknown[] = [];
    await plain.start({
      name: 'lane',
      input: dispatcherInput('c1', 1),
      taskHandlers: {
        [DISPATCHER_TASKS.acquire]: async (payload) => {
          sent.push(payload);
          return laneAnswer(payload, { status: 'acquired', slot, held: 1, capacity: 1 });
        },
        [DISPATCHER_TASKS.invoke]: async (payload) => {
          sent.push(payload);
          return { idle: true, delivered: 1, batches: 1 };
        },
        [DISPATCHER_TASKS.recover]: async () => ({}),
        [DISPATCHER_TASKS.handover]: async () => ({}),
      },
    }).result;
    expect(JSON.stringify(sent)).not.toMatch(/startedAt|laneUntil/);
  });

  it('RC-01 after a failed invocation whose batch keeps its slot the lane ends (its recovery started a Standard lane that waits); with no slot kept it goes on', async () => {
    for (const waitSeconds of [900, 0]) {
      const machine = new LocalStateMachine(express);
      const calls: string[] = [];
      const recovers: unknown[] = [];
      let invokes = 0;
      const execution = machine.start({
        name: `kept-${waitSeconds}`,
        input: dispatcherInput('c1', 7),
        taskHandlers: {
          [DISPATCHER_TASKS.acquire]: async (payload) => {
            calls.push('acquire');
            return laneAnswer(payload, { status: 'acquired', slot, held: 1, capacity: 1, laneUntil: 1 });
          },
          [DISPATCHER_TASKS.invoke]: async () => {
            calls.push('invoke');
            if (invokes++ === 0) throw named('States.Timeout');
            return { idle: true, delivered: 0, batches: 1 };
          },
          [DISPATCHER_TASKS.recover]: async (payload) => {
            calls.push('recover');
            recovers.push(payload);
            return { recovered: true, waitSeconds };
          },
          [DISPATCHER_TASKS.handover]: async () => ({}),
        },
      });
      await execution.result;
      expect(machine.stats().failed).toBe(0);
      expect(recovers[0]).toMatchObject({ action: 'recover', batchId: 'b1', express: { generation: 7 } });
      expect(calls).toEqual(
        waitSeconds > 0
          ? ['acquire', 'invoke', 'recover']
          : ['acquire', 'invoke', 'recover', 'acquire', 'invoke'],
      );
    }
  });

  it('the stand-in ends an execution past its definition’s TimeoutSeconds with States.Timeout, as AWS ends an Express one at five minutes', async () => {
    const machine = new LocalStateMachine({
      TimeoutSeconds: 1,
      StartAt: 'Long',
      States: { Long: { Type: 'Wait', Seconds: 3, End: true } },
    });
    const started = Date.now();
    const execution = machine.start({ name: 'too-long', input: {}, taskHandlers: {} });
    const err = await execution.result.then(
      () => undefined,
      (e: Error) => e,
    );
    expect(err?.name).toBe('States.Timeout');
    expect(Date.now() - started).toBeLessThan(2_500);
    expect(machine.stats().failed).toBe(1);
  });
});
