/**
 * What a producer outside the Host tells it after SQS accepted a send (the producer client's
 * `wake`): which queue, whether a message is due now, and the SQS delays of the others. The Host
 * wakes the queue's consumer as it does for its own sends (`ControlLoop.wake`).
 */
import { z } from 'zod';
import { MESSAGE_LIMITS } from './limits.ts';

export const wakeRequestSchema = z.strictObject({
  /** The SQS queue's name (`<Host prefix><queue uid>`), the last segment of its URL. */
  queue: z.string().regex(/^[A-Za-z0-9_-]{1,80}$/, 'an SQS queue name'),
  now: z.boolean(),
  later: z.array(z.number().int().min(1).max(MESSAGE_LIMITS.sqsMaxDelaySeconds)).max(10),
});

export type WakeRequest = z.infer<typeof wakeRequestSchema>;

/** The queue uid a queue name under `prefix` names, or undefined for a queue of no Host of it. */
export function queueUidOf(queueName: string, prefix: string): string | undefined {
  return queueName.startsWith(prefix) && queueName.length > prefix.length
    ? queueName.slice(prefix.length)
    : undefined;
}
