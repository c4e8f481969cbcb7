import type { composeHost } from '../../composition/compose-host.ts';
import type { QueueInvoker } from '../../delivery/batch-runner.ts';
import type { Slot } from '../../delivery/delivery-service.ts';
import { NamedError } from '../../delivery/limits.ts';
import type { ProduceCall } from '../../delivery/settlement-protocol.ts';
import { log } from '../../shared/log.ts';
import type { LocalWorkerRegistry } from '../workers/local-worker-registry.ts';
import type { QueueInvocation, WorkerPool } from '../workers/worker-pool.ts';

type Host = ReturnType<typeof composeHost>;

/**
 * Runs a slot's batch on the worker module of `--workers-dir` in the worker-thread pool. Producer
 * bindings of `<name>.json` send through the same producer as every other path (AQ-04).
 */
export async function localInvoker(
  slot: Slot,
  deps: { workers: LocalWorkerRegistry; pool: WorkerPool; host: Host },
  onCutOff?: QueueInvocation['onCutOff'],
): Promise<QueueInvoker> {
  const found = await deps.workers.moduleFile(slot.workerSpace, slot.workerName);
  const config = await deps.workers.config(slot.workerSpace, slot.workerName).catch((err: unknown) => {
    // The handler still runs; its producer bindings answer backend_unavailable.
    log.warn('could not read the worker configuration', {
      worker: `${slot.workerSpace}/${slot.workerName}`,
      err,
    });
    return undefined;
  });
  const produce = async (call: ProduceCall): Promise<string[]> => {
    const queueName = config?.queueProducers?.[call.binding]?.queue;
    const uid = queueName ? await deps.host.store.uidByName(slot.workerSpace, queueName) : undefined;
    const target = uid ? await deps.host.queueDirectory.queue(uid) : undefined;
    if (!target) throw new NamedError('backend_unavailable', 'the binding’s queue is not available');
    return deps.host.producer.sendBatch(target, call.messages);
  };
  return {
    // The worker pool ends a cut-off handler's thread before it answers `abandoned`, unless the
    // lane holds it (`onCutOff`, as Lambda lets it run): then it may still run after its batch
    // is finalised, and its slot is kept until its deadline.
    stopsAbandonedHandlers: onCutOff === undefined && deps.pool.stopsAbandonedHandlers,
    // Missing code or configuration: the batch ends unsettled and is retried, never acknowledged.
    invoke: async (delivery, settle, batchSlot, failed) =>
      found && config
        ? deps.pool.invokeQueue({
            file: found.file,
            config,
            delivery,
            settle,
            produce,
            deadline: batchSlot.deadline,
            ...(failed ? { failed } : {}),
            ...(onCutOff ? { onCutOff } : {}),
          })
        : 'abandoned',
  };
}
