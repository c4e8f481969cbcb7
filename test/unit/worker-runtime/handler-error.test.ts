/**
 * What the Host keeps of a handler's error (consumer state): name and message, cut so that the
 * batch host's `finalize` always accepts them, and never the stack.
 */
import { describe, expect, it } from 'vitest';
import { batchHostRequestSchema } from '../../../lambdas/delivery/batch-host-protocol.ts';
import { handlerError } from '../../../lambdas/worker-runtime/error-report.ts';

const slot = {
  batchId: 'b1',
  consumerUid: 'c1',
  generation: 1,
  queueUid: 'q1',
  queueName: 'orders',
  sqsUrl: 'http://sqs/q1',
  maxBatchSize: 10,
  maxBatchTimeoutSeconds: 0,
  deadline: 1,
  invisibleUntil: 1,
  workerUid: 'w1',
  workerSpace: 'default',
  workerName: 'echo',
  workerFunction: 'local',
  maxConcurrency: 1,
  maxRetries: 3,
  retryDelaySeconds: 0,
  handlerMs: 60_000,
  seal: 'sealed-by-the-host',
};

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
