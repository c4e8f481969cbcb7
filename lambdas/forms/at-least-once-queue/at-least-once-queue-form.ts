import type { Execution, Form, Outcome } from '../../engine/forms.ts';
import { FORM_URLS } from '../form-urls.ts';
import type { QueueBackend } from './queue-backend.ts';
import { parseQueueSpec } from './queue-spec.ts';

/**
 * AtLeastOnceQueue 0.2.0 (AQ-01..AQ-03). Every step is idempotent by construction (the SQS name
 * is derived from the uid), so reconcile simply drives the queue to the desired state again.
 */
export function createAtLeastOnceQueueForm(queues: QueueBackend): Form {
  const converge = async (exec: Execution): Promise<Outcome> => {
    if (exec.action === 'delete') {
      const gone = await queues.remove(exec.resourceUid);
      return gone
        ? { kind: 'complete', observed: { queueExists: false }, output: {} }
        : { kind: 'continue', delayMs: 2000 };
    }
    const spec = parseQueueSpec(exec.spec);
    await queues.ensure(exec.resourceUid, {
      space: exec.space,
      retentionSeconds: spec.messageRetentionSeconds,
    });
    const seen = await queues.inspect(exec.resourceUid);
    if (!seen)
      return { kind: 'unknown', code: 'queue_not_confirmed', message: 'the queue is not visible yet' };
    return { kind: 'complete', observed: { queueExists: true, messageCount: seen.messageCount }, output: {} };
  };
  return {
    url: FORM_URLS.atLeastOnceQueue,
    validateCreate: parseQueueSpec,
    validateUpdate: (spec) => parseQueueSpec(spec),
    backend: { execute: converge, reconcile: converge },
    // The background refresh: the live count, or that the SQS queue is gone; a failed read is no answer.
    observe: async (r) => {
      const seen = await queues.inspect(r.uid).catch(() => null);
      if (seen === null) return undefined;
      return seen ? { queueExists: true, messageCount: seen.messageCount } : { queueExists: false };
    },
  };
}
