import type { JsonObject } from '../../engine/model.ts';
import { parseSpec, specInteger, specObject } from '../shared/spec-fields.ts';

export interface QueueSpec {
  messageRetentionSeconds: number;
  deliveryDelaySeconds?: number;
}

/** AtLeastOnceQueue 0.2.0 spec (AQ-01): closed; retention required 60..1209600, delay optional 0..43200. */
export const queueSpecSchema = specObject({
  messageRetentionSeconds: specInteger(60, 1_209_600, {
    description:
      'How long a message is kept before it is dropped unread (SQS MessageRetentionPeriod). A dead-letter move starts the copy’s clock again.',
    updatable: true,
  }),
  deliveryDelaySeconds: specInteger(0, 43_200, {
    description:
      'How long every message waits after it is sent before it can be delivered; a send’s own delaySeconds replaces it for that message.',
    updatable: true,
    default: 0,
  }).optional(),
});

export function parseQueueSpec(value: unknown): QueueSpec & JsonObject {
  return parseSpec(queueSpecSchema, value);
}
