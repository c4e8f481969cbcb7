import type { Execution, Form, FormReads, Outcome, Prepared, PrepareInput } from '../../engine/forms.ts';
import { HostError } from '../../engine/host-error.ts';
import type { JsonObject, ResourceRecord } from '../../engine/model.ts';
import type { QueueBackend } from '../at-least-once-queue/queue-backend.ts';
import { FORM_URLS } from '../form-urls.ts';
import type { WorkerRegistry } from '../module-worker/worker-registry.ts';
import { type AttachmentStore, type DeliveryMonitor, STOPPED } from './attachments.ts';
import { type ConsumerSpec, parseConsumerSpec, parseConsumerUpdate } from './consumer-spec.ts';

/** The claim that makes "one live consumer per queue" atomic (QC-05). */
export const consumerClaimKey = (queueUid: string) => `consumer-of:${queueUid}`;
/** Every change to dead-letter edges in a Space moves this counter, serialising cycle checks (QC-06). */
export const deadLetterGraphKey = (space: string) => `dead-letter-graph:${space}`;
const MAX_CHAIN = 10_000;

export interface QueueConsumerDeps {
  queues: QueueBackend;
  workers: WorkerRegistry;
  attachments: AttachmentStore;
  delivery: DeliveryMonitor;
  getResource(uid: string): Promise<ResourceRecord | undefined>;
}

function references(spec: JsonObject) {
  const s = spec as unknown as ConsumerSpec;
  const refs = [
    { resourceUid: s.queue.resourceUid, form: FORM_URLS.atLeastOnceQueue, role: 'queue' },
    { resourceUid: s.worker.resourceUid, form: FORM_URLS.moduleWorker, role: 'worker' },
  ];
  if (s.deadLetterQueue) {
    refs.push({
      resourceUid: s.deadLetterQueue.resourceUid,
      form: FORM_URLS.atLeastOnceQueue,
      role: 'deadLetterQueue',
    });
  }
  return refs;
}

const conflict = (detail: string): never => {
  throw new HostError('dependency_conflict', detail);
};

/** Live, same principal and Space, exact Form, not being deleted (QC-03); else 409. */
async function liveTarget(reads: FormReads, input: PrepareInput, uid: string, form: string, role: string) {
  const r = await reads.getResource(uid);
  if (!r || r.principal !== input.principal || r.space !== input.space || r.deletedAt) {
    return conflict(`${role} does not name a live Resource in this Space`);
  }
  if (r.form !== form) return conflict(`${role} must be a ${form} Resource`);
  if (r.phase === 'deleting') return conflict(`${role} is being deleted`);
  return r;
}

/**
 * QueueConsumer 0.3.0. Cross-Resource rules are checked before acceptance and committed with it:
 * references (live targets), a claim on the queue (one consumer per queue) and, when a dead-letter
 * edge changes, a version guard on the Space's dead-letter graph, so two concurrent writes that
 * together would close a cycle cannot both commit.
 */
export function createQueueConsumerForm(deps: QueueConsumerDeps): Form {
  async function prepare(input: PrepareInput, reads: FormReads): Promise<Prepared> {
    const spec = input.spec as unknown as ConsumerSpec;
    const graphVersion = await reads.getVersion(deadLetterGraphKey(input.space));
    await liveTarget(reads, input, spec.queue.resourceUid, FORM_URLS.atLeastOnceQueue, 'queue');
    const worker = await liveTarget(reads, input, spec.worker.resourceUid, FORM_URLS.moduleWorker, 'worker');
    const dlq = spec.deadLetterQueue?.resourceUid;
    if (dlq) await liveTarget(reads, input, dlq, FORM_URLS.atLeastOnceQueue, 'deadLetterQueue');
    const code = await deps.workers.lookup(worker.space, worker.name);
    if (!code) {
      const where =
        deps.workers.describeMissing?.(worker.space, worker.name) ??
        'no deployed code (a ModuleWorkerFunction for this Space and name)';
      conflict(
        `the worker ${worker.name} has no code: ${where}; its observed.ready stays false until it has`,
      );
    }
    if (!code?.handlers.includes('queue'))
      conflict(
        'the worker has no queue handler: its module must export queue(batch, env, ctx) (and declare it)',
      );

    const claimKey = consumerClaimKey(spec.queue.resourceUid);
    const held = await reads.getClaim(claimKey);
    if (held && held.owner !== input.uid)
      conflict('the queue already has a consumer; delete that consumer first, or use another queue');
    const previousDlq = held?.owner === input.uid ? (held.attributes.deadLetterQueue ?? null) : null;

    if (dlq) {
      // Each queue has at most one consumer, so dead-letter edges form chains: follow the chain
      // from the new target; reaching this consumer's own queue would close a cycle.
      let at: string | null = dlq;
      for (let hops = 0; at !== null; hops++) {
        if (at === spec.queue.resourceUid)
          conflict(
            'deadLetterQueue would send messages in a loop: following the dead-letter queues of the consumers from it leads back to this queue',
          );
        if (hops > MAX_CHAIN) conflict('the dead-letter chain is too long to check');
        const next = await reads.getClaim(consumerClaimKey(at));
        at = next?.attributes.deadLetterQueue ?? null;
      }
    }
    const edgeChanges = (dlq ?? null) !== previousDlq && dlq !== undefined;
    return {
      references: references(input.spec),
      claims: [{ key: claimKey, attributes: { consumer: input.uid, deadLetterQueue: dlq ?? null } }],
      versions: edgeChanges ? [{ key: deadLetterGraphKey(input.space), expected: graphVersion }] : [],
    };
  }

  async function observe(spec: ConsumerSpec, attached: boolean) {
    const observed: JsonObject = { consumerAttached: attached };
    const queue = await deps.queues.inspect(spec.queue.resourceUid).catch(() => null);
    if (queue !== null) observed.queueExists = queue !== undefined;
    const worker = await deps.getResource(spec.worker.resourceUid).catch(() => null);
    if (worker !== null) {
      const code =
        worker && !worker.deletedAt
          ? await deps.workers.lookup(worker.space, worker.name).catch(() => null)
          : undefined;
      if (code !== null) observed.workerExists = code !== undefined;
    }
    return observed;
  }

  const converge = async (exec: Execution): Promise<Outcome> => {
    const spec = exec.spec as unknown as ConsumerSpec;
    if (exec.action === 'delete') {
      // QC-08: set the stop boundary, then complete only once no batch is in flight; unsettled
      // messages stay in the queue, never acknowledged by the detach.
      const stopping = await deps.attachments.get(exec.resourceUid);
      await deps.attachments.stop(exec.resourceUid);
      if (stopping) await deps.delivery.fence(exec.resourceUid, STOPPED, stopping.spec.maxConcurrency);
      const inFlight = await deps.delivery.inFlightBatches(exec.resourceUid);
      if (inFlight > 0) return { kind: 'continue', delayMs: 1000 };
      await deps.attachments.remove(exec.resourceUid);
      return { kind: 'complete', observed: await observe(spec, false), output: {} };
    }
    const queue = await deps.getResource(spec.queue.resourceUid);
    const attachment = {
      consumerUid: exec.resourceUid,
      space: exec.space,
      queueName: queue?.name ?? spec.queue.resourceUid,
      generation: exec.generation,
      spec,
      state: 'active' as const,
    };
    const active = await deps.attachments.get(exec.resourceUid);
    // Slots the replaced generation took and never registered — a lane whose AcquireSlot answer
    // was lost, or that died while gathering — would hold the new bound until their deadline (about
    // a minute) and the supervisor's next round. Freed before the new generation is active, so
    // none of its own slots is among them; a live old lane's registration is then refused, as it
    // would be after the update, and gives its messages back.
    if (active?.state === 'active' && active.generation < exec.generation) {
      await deps.delivery.fence(exec.resourceUid, exec.generation, active.spec.maxConcurrency);
      await deps.delivery.replacing(exec.resourceUid);
    }
    await deps.attachments.activate(attachment);
    // A consumer with a backlog goes on at its new settings now: the old generation's lanes end
    // as their batches do, and nothing else would start the new one's before the supervisor.
    await deps.delivery.activated?.(attachment);
    return { kind: 'complete', observed: await observe(spec, true), output: {} };
  };

  return {
    url: FORM_URLS.queueConsumer,
    validateCreate: parseConsumerSpec,
    validateUpdate: parseConsumerUpdate,
    references,
    prepare,
    backend: { execute: converge, reconcile: converge },
    // The background refresh: all three facts, or nothing when any of them could not be read.
    observe: async (r) => {
      const spec = r.spec as unknown as ConsumerSpec;
      const a = await deps.attachments.get(r.uid).catch(() => null);
      if (a === null) return undefined;
      const observed = await observe(spec, a?.state === 'active');
      return 'queueExists' in observed && 'workerExists' in observed ? observed : undefined;
    },
  };
}
