import type { BatchHostPort } from './batch-runner.ts';
import type { DeliveryService } from './delivery-service.ts';

/** The runner's view of the Host when both run in one process (the local Host). */
export function directBatchHost(service: DeliveryService): BatchHostPort {
  return {
    acquire: (previous, credential) => service.acquireNext(previous, credential),
    register: (slot, received) => service.register(slot, received),
    settle: (batchId, credential, call) => service.settle(batchId, credential, call),
    finalize: (slot, credential, outcome, receipts) =>
      service.finalizeAsRunner(slot.batchId, credential, outcome, receipts),
    deadLetter: (slot, items, ofBatch) =>
      service.deadLetter(slot.consumerUid, slot.queueUid, items, {
        batchId: slot.batchId,
        phase: ofBatch ? 'finalize' : 'registration',
      }),
  };
}
