import type { AcquireResult, DeliveryService } from './delivery-service.ts';
import type { DispatcherStepInput } from './dispatcher-definition.ts';

/** The Host's dispatcher step (AcquireSlot, RecoverBatch): one function for Lambda and local runs. */
export async function dispatcherStep(
  service: DeliveryService,
  input: DispatcherStepInput,
): Promise<AcquireResult | { recovered: true }> {
  if (input.action === 'acquire') return service.acquire(input.consumerUid, input.generation);
  await service.recoverBatch(input.consumerUid, input.batchId);
  return { recovered: true };
}
