/**
 * Issue 13: a lane started from a running one brings that lane's sealed context in its input;
 * the state machine hands it to the first AcquireSlot only (later rounds read afresh), and an
 * input from an older Host, without it, still runs: every path of the definition resolves.
 * Run under the local stand-in of Step Functions, which executes the definition AWS runs.
 */
import { describe, expect, it } from 'vitest';
import {
  DISPATCHER_TASKS,
  dispatcherDefinition,
  dispatcherInput,
} from '../../../lambdas/delivery/dispatcher-definition.ts';
import { LocalStateMachine } from '../../../lambdas/local/standins/local-step-functions.ts';

const definition = dispatcherDefinition({ stepFunction: 'arn:aws:lambda:local:000000000000:function:step' });
const slot = { batchId: 'b1', workerFunction: 'arn:aws:lambda:local:000000000000:function:worker' };

/** Runs a lane of three rounds; returns what each AcquireSlot was sent. */
async function acquirePayloads(input: unknown): Promise<unknown[]> {
  const machine = new LocalStateMachine(definition);
  const sent: unknown[] = [];
  let rounds = 0;
  const execution = machine.start({
    name: 'lane',
    input,
    taskHandlers: {
      [DISPATCHER_TASKS.acquire]: async (payload) => {
        sent.push(payload);
        return { status: 'acquired', slot, held: 1, capacity: 2 };
      },
      [DISPATCHER_TASKS.invoke]: async () => ({ idle: ++rounds >= 3, delivered: 1, batches: 1 }),
      [DISPATCHER_TASKS.recover]: async () => ({ recovered: true, waitSeconds: 0 }),
      [DISPATCHER_TASKS.handover]: async () => ({ handedOver: false }),
    },
  });
  await execution.result;
  expect(machine.stats().failed).toBe(0);
  return sent;
}

describe('dispatcher: an inherited lane context', () => {
  it('reaches the first AcquireSlot as sealed, and no later one', async () => {
    const lane = { consumerUid: 'c1', generation: 1, contextReadAt: 5, seal: 'mac' };
    expect(await acquirePayloads(dispatcherInput('c1', 1, 0, undefined, lane))).toEqual([
      { action: 'acquire', consumerUid: 'c1', generation: 1, inherit: lane },
      { action: 'acquire', consumerUid: 'c1', generation: 1, inherit: {} },
      { action: 'acquire', consumerUid: 'c1', generation: 1, inherit: {} },
    ]);
  });

  it('an input without one (an older Host’s) and one that waits first run as before', async () => {
    const acquire = { action: 'acquire', consumerUid: 'c1', generation: 1, inherit: {} };
    expect(await acquirePayloads({ consumerUid: 'c1', generation: 1, round: 0, idle: false })).toEqual([
      acquire,
      acquire,
      acquire,
    ]);
    const waits = { consumerUid: 'c1', generation: 1, round: 0, idle: false, startAfter: 0 };
    expect(await acquirePayloads(waits)).toHaveLength(3);
  });
});
