/**
 * The local lane's Lambda cut-off (lambdas/local/lanes/lambda-cut-off.ts): after a handler was cut
 * off the invocation takes no further slot, finalises with no next slot, ends the held handler
 * only once the lane's run has ended, and then fails as Lambda reports a process exit.
 */
import { describe, expect, it } from 'vitest';
import type { BatchHostPort } from '../../../lambdas/delivery/batch-runner.ts';
import type { Slot } from '../../../lambdas/delivery/delivery-service.ts';
import { LambdaCutOff } from '../../../lambdas/local/lanes/lambda-cut-off.ts';

function recordingHost() {
  const calls: string[] = [];
  const host = {
    acquire: async () => {
      calls.push('acquire');
      return { status: 'acquired' };
    },
    register: async () => ({}),
    settle: async () => undefined,
    settleMany: async () => [],
    finalize: async (_s: Slot, _c: string, outcome: string, opts?: { next?: boolean }) => {
      calls.push(`finalize ${outcome} next=${opts?.next}`);
      return {};
    },
    deadLetter: async () => undefined,
  } as unknown as BatchHostPort;
  return { host, calls };
}

const slot = {} as Slot;

describe('LambdaCutOff', () => {
  it('DL-02 without a cut-off it changes nothing: the host answers, the run’s result or error passes through', async () => {
    const { host, calls } = recordingHost();
    const cutOff = new LambdaCutOff();
    const lane = cutOff.host(host);
    expect(await lane.acquire(slot, 'c')).toEqual({ status: 'acquired' });
    await lane.finalize(slot, 'c', 'returned', { next: true });
    expect(calls).toEqual(['acquire', 'finalize returned next=true']);
    expect(await cutOff.ending(Promise.resolve({ idle: true }))).toEqual({ idle: true });
    await expect(cutOff.ending(Promise.reject(new Error('boom')))).rejects.toThrow('boom');
  });

  it('DL-02 after a cut-off: no next slot, no further acquire; the held handler ends after the run, then Runtime.ExitError', async () => {
    const { host, calls } = recordingHost();
    const cutOff = new LambdaCutOff();
    const lane = cutOff.host(host);
    const order: string[] = [];
    cutOff.hold('b1', () => order.push('handler ended'));
    await lane.finalize(slot, 'c', 'abandoned', { next: true });
    expect(await lane.acquire(slot, 'c')).toEqual({ status: 'stop' });
    expect(calls).toEqual(['finalize abandoned next=false']);
    let finish: (v: unknown) => void = () => {};
    const run = new Promise((r) => {
      finish = r;
    });
    const ended = cutOff.ending(run).catch((err: Error) => err);
    await new Promise((r) => setTimeout(r, 20));
    expect(order).toEqual([]); // the handler runs on while the lane finishes
    order.push('run ended');
    finish({ idle: false });
    const err = (await ended) as Error;
    expect(err.name).toBe('Runtime.ExitError');
    expect(err.message).toContain('b1');
    expect(order).toEqual(['run ended', 'handler ended']);
    // A run that failed after the cut-off fails the same way.
    const again = new LambdaCutOff();
    again.hold('b2', () => {});
    await expect(again.ending(Promise.reject(new Error('finalize failed')))).rejects.toMatchObject({
      name: 'Runtime.ExitError',
    });
  });
});
