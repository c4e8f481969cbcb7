/**
 * What the Host keeps of a handler's error (consumer state): name and message, cut so that the
 * batch host's `finalize` always accepts them, and never the stack.
 */
import { describe, expect, it } from 'vitest';
import { batchHostRequestSchema } from '../../../lambdas/delivery/batch-host-protocol.ts';
import { handlerError } from '../../../lambdas/worker-runtime/error-report.ts';
import { slot } from './slot-fixture.ts';

describe('handlerError', () => {
  it('keeps name and message, never the stack, within the bounds finalize accepts', () => {
    class VeryLongNamedError extends Error {
      override name = 'E'.repeat(500);
    }
    const huge = handlerError(new VeryLongNamedError('m'.repeat(10_000)));
    expect(huge.name).toHaveLength(128);
    expect(huge.message).toHaveLength(300);
    expect(Object.keys(huge).sort()).toEqual(['message', 'name']);
    const request = { action: 'finalize', slot, credential: 'x', outcome: 'threw', error: huge };
    expect(batchHostRequestSchema.safeParse(request).success).toBe(true);
    expect(handlerError(new TypeError('x is undefined'))).toEqual({
      name: 'TypeError',
      message: 'x is undefined',
    });
    expect(handlerError('a string')).toEqual({ name: 'string', message: 'a string' });
  });
});
