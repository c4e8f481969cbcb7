import type { BatchHostPort } from './batch-runner.ts';
import type { ControlLoop } from './control-loop.ts';
import type { DeliveryService } from './delivery-service.ts';

/**
 * The runner's view of the Host when both run in one process (the local Host). It makes the same
 * calls, with the same checks, as the batch-host function on AWS: every call after registration
 * needs the batch credential, and moves act only on what registration recorded.
 */
export function directBatchHost(
  service: DeliveryService,
  loop: Pick<ControlLoop, 'register'>,
): BatchHostPort {
  return {
    acquire: (previous, credential) => service.acquireNext(previous, credential),
    register: (slot, received, opts) => loop.register(slot, received, opts),
    settle: (batchId, credential, call) => service.settle(batchId, credential, call),
    settleMany: (batchId, credential, calls) => service.settleMany(batchId, credential, calls),
    finalize: (slot, credential, outcome, opts) =>
      service.finalizeAsRunner(slot.batchId, credential, outcome, { slot, ...opts }),
    deadLetter: (slot, credential, items) =>
      service.deadLetterAsRunner(slot.batchId, credential, items, true),
    defer: async (slot, items) => {
      await service.deferAsRunner(slot, items);
    },
  };
}
