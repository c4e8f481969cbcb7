/**
 * The local lanes call one set of Task handlers for every execution, as every execution on AWS
 * invokes the same Lambda functions: injected invocation faults then draw from one schedule. Made
 * per execution, each lane's first AcquireSlot met the same first draw of a fresh stream, so a
 * seed whose first draw fires failed (or overlapped) every lane's first step at once.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { FAULTS_ENV } from '../../../lambdas/local/faults/fault-config.ts';
import { type InjectedFault, onInjectedFault } from '../../../lambdas/local/faults/fault-reports.ts';
import { LocalLanes, type LocalLanesOptions } from '../../../lambdas/local/lanes/local-lanes.ts';
import { LocalStateMachine } from '../../../lambdas/local/standins/local-step-functions.ts';

afterEach(() => {
  vi.restoreAllMocks();
  delete process.env[FAULTS_ENV];
});

describe('LocalLanes', () => {
  it('RC-04 every execution calls the same Task handlers, so their injected faults follow one schedule', async () => {
    process.env[FAULTS_ENV] = JSON.stringify({
      seed: 4,
      localInvoke: { functions: { step: { serviceError: 0.3 } } },
    });
    const given: Record<string, unknown>[] = [];
    const start = LocalStateMachine.prototype.start;
    vi.spyOn(LocalStateMachine.prototype, 'start').mockImplementation(function (this: LocalStateMachine, o) {
      given.push(o.taskHandlers);
      return start.call(this, o);
    });
    const faults: InjectedFault[] = [];
    const off = onInjectedFault((f) => faults.push(f));
    const lanes = new LocalLanes();
    let steps = 0;
    lanes.attach({
      loop: {
        step: async () => {
          steps++;
          return { status: 'stop', lane: { consumerUid: 'c', generation: 1, round: 1, inherit: {} } };
        },
      },
      host: {},
      messages: {},
      invokerFor: async () => ({ invoke: async () => 'returned' }),
      idleWaitSeconds: 0,
    } as unknown as LocalLanesOptions);
    try {
      for (let i = 0; i < 6; i++)
        await lanes.start(`lane-${i}`, {
          consumerUid: 'c',
          generation: 1,
          round: 0,
          idle: false,
          inherit: {},
        });
      await vi.waitFor(() => expect(lanes.running()).toEqual([]), { timeout: 30_000 });
    } finally {
      off();
      await lanes.stop(100);
    }
    expect(given).toHaveLength(6);
    expect(new Set(given).size).toBe(1);
    // One schedule: some first steps failed and some did not (a stream per execution would
    // have given all six the same draws, so a multiple of six faults).
    expect(faults.length).toBeGreaterThan(0);
    expect(faults.length % 6).not.toBe(0);
    expect(steps).toBeGreaterThanOrEqual(6);
  }, 60_000);
});
