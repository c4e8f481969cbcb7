import { SpecError } from '../../engine/forms.ts';
import type { JsonObject } from '../../engine/model.ts';
import { closedObject, integerField, referenceField } from '../shared/spec-fields.ts';

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

const FIELDS = [
  'queue',
  'worker',
  'maxBatchSize',
  'maxBatchTimeoutSeconds',
  'maxConcurrency',
  'maxRetries',
  'retryDelaySeconds',
  'deadLetterQueue',
] as const;

/** QueueConsumer 0.3.0 spec (QC-01): closed and exact, every integer required, no defaults. */
export function parseConsumerSpec(value: unknown): ConsumerSpec & JsonObject {
  const obj = closedObject(value, 'spec', FIELDS);
  const queue = referenceField(obj, 'queue', true) as string;
  const worker = referenceField(obj, 'worker', true) as string;
  const spec: ConsumerSpec & JsonObject = {
    queue: { resourceUid: queue },
    worker: { resourceUid: worker },
    maxBatchSize: integerField(obj, 'maxBatchSize', 1, 100, true) as number,
    maxBatchTimeoutSeconds: integerField(obj, 'maxBatchTimeoutSeconds', 0, 60, true) as number,
    maxConcurrency: integerField(obj, 'maxConcurrency', 1, 250, true) as number,
    maxRetries: integerField(obj, 'maxRetries', 0, 100, true) as number,
    retryDelaySeconds: integerField(obj, 'retryDelaySeconds', 0, 43_200, true) as number,
  };
  const dlq = referenceField(obj, 'deadLetterQueue', false);
  if (dlq !== undefined) {
    if (dlq === queue) throw new SpecError('deadLetterQueue must not be the consumer’s own queue');
    spec.deadLetterQueue = { resourceUid: dlq };
  }
  return spec;
}

/** Update replaces the whole spec, but `queue` and `worker` are fixed for the life of the uid (QC-07). */
export function parseConsumerUpdate(value: unknown, current: JsonObject): ConsumerSpec & JsonObject {
  const next = parseConsumerSpec(value);
  const was = current as unknown as ConsumerSpec;
  if (next.queue.resourceUid !== was.queue.resourceUid)
    throw new SpecError('queue cannot change; delete and re-create the consumer');
  if (next.worker.resourceUid !== was.worker.resourceUid)
    throw new SpecError('worker cannot change; delete and re-create the consumer');
  return next;
}
