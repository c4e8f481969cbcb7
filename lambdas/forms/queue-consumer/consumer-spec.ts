import { SpecError } from '../../engine/forms.ts';
import type { JsonObject } from '../../engine/model.ts';
import { fixedFields, parseSpec, specInteger, specObject, specReference } from '../shared/spec-fields.ts';

export interface ConsumerSpec {
  queue: { resourceUid: string };
  worker: { resourceUid: string };
  maxBatchSize: number;
  maxBatchTimeoutSeconds: number;
  maxConcurrency: number;
  maxRetries: number;
  retryDelaySeconds: number;
  deadLetterQueue?: { resourceUid: string };
}

/** QueueConsumer 0.3.0 spec (QC-01): closed and exact, every integer required, no defaults. */
export const consumerSpecSchema = specObject({
  queue: specReference({
    description: 'The queue whose messages this consumer delivers. A queue has at most one consumer.',
    updatable: false,
    refersTo: 'queue',
  }),
  worker: specReference({
    description:
      'The ModuleWorker whose queue(batch, env, ctx) handler receives the batches; it must declare queue.',
    updatable: false,
    refersTo: 'worker',
  }),
  maxBatchSize: specInteger(1, 100, {
    description: 'The most messages in one batch.',
    updatable: true,
  }),
  maxBatchTimeoutSeconds: specInteger(0, 60, {
    description: 'The longest a batch waits to fill up before it is delivered with what it has (0: no wait).',
    updatable: true,
  }),
  maxConcurrency: specInteger(1, 250, {
    description: 'The most batches of this consumer whose handler runs at the same time.',
    updatable: true,
  }),
  maxRetries: specInteger(0, 100, {
    description:
      'Redeliveries after the first delivery (so at most 1 + maxRetries deliveries); then the message moves to deadLetterQueue, or is dropped without one.',
    updatable: true,
  }),
  retryDelaySeconds: specInteger(0, 43_200, {
    description:
      'How long a message waits before its next delivery when it is retried without a delay of its own.',
    updatable: true,
  }),
  deadLetterQueue: specReference({
    description:
      'Where a message out of retries is moved (as a new message); without it the message is dropped. Not the consumer’s own queue, and no loop through other consumers.',
    updatable: true,
    refersTo: 'queue',
  }).optional(),
});

const FIXED = fixedFields(consumerSpecSchema) as ('queue' | 'worker')[];

export function parseConsumerSpec(value: unknown): ConsumerSpec & JsonObject {
  const spec = parseSpec(consumerSpecSchema, value);
  if (spec.deadLetterQueue && spec.deadLetterQueue.resourceUid === spec.queue.resourceUid) {
    throw new SpecError('deadLetterQueue must not be the consumer’s own queue');
  }
  return spec;
}

/** Update replaces the whole spec, but `queue` and `worker` are fixed for the life of the uid (QC-07). */
export function parseConsumerUpdate(value: unknown, current: JsonObject): ConsumerSpec & JsonObject {
  const next = parseConsumerSpec(value);
  const was = current as unknown as ConsumerSpec;
  for (const field of FIXED) {
    if (next[field].resourceUid !== was[field].resourceUid)
      throw new SpecError(`${field} cannot change; delete and re-create the consumer`);
  }
  return next;
}
