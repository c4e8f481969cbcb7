/**
 * Issue 13: a lane started from a running one brings that lane's sealed context in its input;
 * the state machine hands it to the first AcquireSlot only (later rounds read afresh), and an
 * input from an older Host, without it, still runs: every path of the definition resolves.
 * AcquireSlot counts the rounds and rebuilds the lane's state (`laneAfterAcquire`), so a round
 * is four states: AcquireSlot, SlotTaken, InvokeWorker, Continue.
 * Run under the local stand-in of Step Functions, which executes the definition AWS runs.
 */
import { describe, expect, it } from 'vitest';
import { type LaneState, laneAfterAcquire } from '../../../lambdas/delivery/control-loop.ts';
import {
  DISPATCHER_TASKS,
  dispatcherDefinition,
  dispatcherInput,
} from '../../../lambdas/delivery/dispatcher-definition.ts';
import { LocalStateMachine } from '../../../lambdas/local/standins/local-step-functions.ts';

const definition = dispatcherDefinition({ stepFunction: 'arn:aws:lambda:local:000000000000:function:step' });
const slot = { batchId: 'b1', workerFunction: 'arn:aws:lambda:local:000000000000:function:worker' };

/** What AcquireSlot was sent of the lane's state, with the step's own reading of it. */
interface Sent {
  inherit: unknown;
  round: unknown;
  startAfter: unknown;
}

/** Runs a lane of three rounds; returns what each AcquireSlot was sent, and the transitions. */
async function acquirePayloads(input: unknown): Promise<{ sent: Sent[]; transitions: number }> {
  const machine = new LocalStateMachine(definition);
  const sent: Sent[] = [];
  let rounds = 0;
  const execution = machine.start({
    name: 'lane',
    input,
    waitTimeOverrides: { WaitToStart: 1 },
    taskHandlers: {
      // As the step Lambda answers (ControlLoop.step), with a slot always free.
      [DISPATCHER_TASKS.acquire]: async (payload) => {
        const { action, lane } = payload as { action: string; lane: LaneState };
        expect(action).toBe('acquire');
        expect(lane).toMatchObject({ consumerUid: 'c1', generation: 1 });
        sent.push({ inherit: lane.inherit, round: lane.round, startAfter: lane.startAfter });
        const { wait, next } = laneAfterAcquire(lane);
        if (wait !== undefined) return { status: 'wait', waitSeconds: wait, lane: next };
        return { status: 'acquired', slot, held: 1, capacity: 2, lane: next };
      },
      [DISPATCHER_TASKS.invoke]: async () => ({ idle: ++rounds >= 3, delivered: 1, batches: 1 }),
      [DISPATCHER_TASKS.recover]: async () => ({ recovered: true, waitSeconds: 0 }),
      [DISPATCHER_TASKS.handover]: async () => ({ handedOver: false }),
    },
  });
  await execution.result;
  expect(machine.stats().failed).toBe(0);
  return { sent, transitions: execution.history().transitions };
}

describe('dispatcher: an inherited lane context', () => {
  it('reaches the first AcquireSlot as sealed, and no later one; each round is four transitions', async () => {
    const lane = { consumerUid: 'c1', generation: 1, contextReadAt: 5, seal: 'mac' };
    const { sent, transitions } = await acquirePayloads(dispatcherInput('c1', 1, 0, undefined, lane));
    expect(sent).toEqual([
      { inherit: lane, round: 0, startAfter: undefined },
      { inherit: {}, round: 1, startAfter: undefined },
      { inherit: {}, round: 2, startAfter: undefined },
    ]);
    // Three rounds of AcquireSlot, SlotTaken, InvokeWorker, Continue; then LaneDone.
    expect(transitions).toBe(3 * 4 + 1);
  });

  it('an input without one (an older Host’s) and one that waits first run as before', async () => {
    const plain = await acquirePayloads({ consumerUid: 'c1', generation: 1, round: 0, idle: false });
    expect(plain.sent.map((s) => s.inherit)).toEqual([undefined, {}, {}]);
    expect(plain.sent.map((s) => s.round)).toEqual([0, 1, 2]);
    // A lane for messages due later waits once (AcquireSlot answers `wait`, its context kept,
    // startAfter dropped, the wait counted as a round), then runs its three rounds with the
    // context it was started with.
    const lane = { consumerUid: 'c1', generation: 1, contextReadAt: 5, seal: 'mac' };
    const waits = await acquirePayloads(dispatcherInput('c1', 1, 0, 2, lane));
    expect(waits.sent).toEqual([
      { inherit: lane, round: 0, startAfter: 2 },
      { inherit: lane, round: 1, startAfter: undefined },
      { inherit: {}, round: 2, startAfter: undefined },
      { inherit: {}, round: 3, startAfter: undefined },
    ]);
    // The wait adds AcquireSlot, SlotTaken and WaitToStart.
    expect(waits.transitions).toBe(3 * 4 + 1 + 3);
  });
});
