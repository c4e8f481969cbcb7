import type { JsonObject } from '../../engine/model.ts';
import { closedObject, integerField } from '../shared/spec-fields.ts';

export interface QueueSpec {
  messageRetentionSeconds: number;
  deliveryDelaySeconds?: number;
}

/** AtLeastOnceQueue 0.2.0 spec (AQ-01): closed; retention required 60..1209600, delay optional 0..43200. */
export function parseQueueSpec(value: unknown): QueueSpec & JsonObject {
  const obj = closedObject(value, 'spec', ['messageRetentionSeconds', 'deliveryDelaySeconds']);
  const spec: QueueSpec & JsonObject = {
    messageRetentionSeconds: integerField(obj, 'messageRetentionSeconds', 60, 1_209_600, true) as number,
  };
  const delay = integerField(obj, 'deliveryDelaySeconds', 0, 43_200, false);
  if (delay !== undefined) spec.deliveryDelaySeconds = delay;
  return spec;
}
