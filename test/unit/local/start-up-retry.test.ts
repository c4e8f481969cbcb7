import { describe, expect, it } from 'vitest';
import { retriedAtStartUp } from '../../../lambdas/local/start-up-retry.ts';

describe('start-up steps of the local Host, tried again on transient errors', () => {
  it('RC-01 a step that fails twice, then succeeds, answers its result on the third try', async () => {
    let tries = 0;
    const out = await retriedAtStartUp(
      'a step',
      async () => {
        tries++;
        if (tries < 3) throw Object.assign(new Error('lost'), { name: 'TimeoutError' });
        return 'done';
      },
      { firstWaitMs: 1 },
    );
    expect(out).toBe('done');
    expect(tries).toBe(3);
  });

  it('RC-01 a step that keeps failing fails the start-up with its last error, after every try', async () => {
    let tries = 0;
    const step = async () => {
      tries++;
      throw new Error(`failure ${tries}`);
    };
    await expect(retriedAtStartUp('a step', step, { tries: 4, firstWaitMs: 1 })).rejects.toThrow('failure 4');
    expect(tries).toBe(4);
  });
});
