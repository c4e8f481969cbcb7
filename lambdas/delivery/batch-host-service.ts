import type { ResourceRecord } from '../engine/model.ts';
import type { AttachmentStore } from '../forms/queue-consumer/attachments.ts';
import type { BatchHostRequest } from './batch-host-protocol.ts';
import { fromBase64, PAYLOAD_LIMIT_BYTES } from './batch-host-protocol.ts';
import type { ControlLoop } from './control-loop.ts';
import type { DeliveryService } from './delivery-service.ts';
import type { DeliveryStore } from './delivery-store.ts';
import { NamedError } from './limits.ts';
import type { QueueDirectory, QueueTarget } from './ports.ts';

export interface BatchHostServiceOptions {
  delivery: DeliveryService;
  /** Registrations go through the control loop, which may start another lane for a full batch. */
  loop: Pick<ControlLoop, 'register'>;
  /** Read-only use: batch heads, to tie a producer call to its batch's consumer. */
  store: Pick<DeliveryStore, 'getHead'>;
  attachments: Pick<AttachmentStore, 'get'>;
  getResource(uid: string): Promise<ResourceRecord | undefined>;
  uidByName(space: string, name: string): Promise<string | undefined>;
  queueDirectory: QueueDirectory;
  sendBatch(target: QueueTarget, messages: unknown): Promise<string[]>;
  /** The producer bindings a worker was deployed with (its registration). */
  producerBindings(space: string, name: string): Promise<Record<string, { queue: string }> | undefined>;
  /** Told about finalised batches and dead-letter moves (metrics). */
  onFinalized?(outcome: string): void;
  onDeadLettered?(count: number): void;
}

/**
 * The Host side of a worker runtime's calls (the batch-host Lambda). Everything a caller says is
 * checked against the Host's own records: `register` trusts only the slot's batch id (the slot
 * map must hold it); `settle` and `finalize` need the batch credential (DeliveryService checks
 * it); `deadLetter` and `produce` need it too, and are tied to the consumer and queue the batch
 * really belongs to, so a worker can neither act on another consumer's queue nor send through a
 * binding its registration does not list.
 */
export class BatchHostService {
  private readonly o: BatchHostServiceOptions;

  constructor(opts: BatchHostServiceOptions) {
    this.o = opts;
  }

  async handle(request: BatchHostRequest): Promise<unknown> {
    switch (request.action) {
      case 'acquire':
        return this.o.delivery.acquireNext(request.previous, request.credential);
      case 'register':
        return this.o.loop.register(request.slot, request.received, {
          ...(request.goOn ? { goOn: true } : {}),
          ...(request.visibleForMs !== undefined ? { visibleForMs: request.visibleForMs } : {}),
        });
      case 'settle':
        await this.o.delivery.settle(request.batchId, request.credential, request.call);
        return null;
      case 'settleMany':
        return this.o.delivery.settleMany(request.batchId, request.credential, request.calls);
      case 'finalize': {
        const out = await this.o.delivery.finalizeAsRunner(
          request.slot.batchId,
          request.credential,
          request.outcome,
          {
            slot: request.slot,
            next: request.next === true,
            ...(request.manifest ? { manifest: request.manifest } : {}),
            ...(request.error ? { error: request.error } : {}),
            ...(request.handlerMayRun ? { handlerMayRun: true } : {}),
          },
        );
        this.o.onFinalized?.(request.outcome);
        return out;
      }
      case 'deadLetter':
        await this.deadLetter(request);
        return null;
      case 'defer':
        // The slot's seal and each item's bounds are checked by DeliveryService.
        return this.o.delivery.deferAsRunner(
          request.slot,
          request.items.map((i) => ({ ...i, body: fromBase64(i.body) })),
        );
      case 'produce':
        return this.produce(request);
    }
  }

  private async deadLetter(request: Extract<BatchHostRequest, { action: 'deadLetter' }>): Promise<void> {
    // The credential, the batch's consumer and queue, and which messages are owed a move are
    // checked against the Host's own records (DeliveryService); the call only brings the bodies.
    await this.o.delivery.deadLetterAsRunner(
      request.slot.batchId,
      request.credential,
      request.items.map((i) => ({ id: i.id, body: fromBase64(i.body) })),
      request.last,
    );
    this.o.onDeadLettered?.(request.items.length);
  }

  private async produce(request: Extract<BatchHostRequest, { action: 'produce' }>): Promise<string[]> {
    const ended = () =>
      new NamedError('backend_unavailable', 'the invocation that owned this binding has ended');
    if (!this.o.delivery.credentialMatches(request.batchId, request.credential)) throw ended();
    const head = await this.o.store.getHead(request.batchId);
    if (!head || head.closed) throw ended();
    const bytes = request.messages.reduce((n, m) => n + m.body.length, 0);
    if (bytes > PAYLOAD_LIMIT_BYTES) {
      throw new NamedError('batch_too_large', 'the messages exceed what one call can carry');
    }
    const consumer = await this.o.attachments.get(head.consumerUid);
    const worker = consumer ? await this.o.getResource(consumer.spec.worker.resourceUid) : undefined;
    if (!worker) throw ended();
    const bindings = await this.o.producerBindings(worker.space, worker.name);
    const queueName =
      bindings && Object.hasOwn(bindings, request.binding) ? bindings[request.binding]?.queue : undefined;
    if (!queueName) throw new NamedError('invalid_body', 'no such producer binding');
    // Bindings name a queue Resource in the worker's own Space, never anywhere else.
    const uid = await this.o.uidByName(worker.space, queueName);
    const target = uid ? await this.o.queueDirectory.queue(uid) : undefined;
    if (!target || target.space !== worker.space) {
      throw new NamedError('backend_unavailable', 'the binding’s queue is not available');
    }
    const messages = request.messages.map((m) => ({ ...m, body: fromBase64(m.body) }));
    return this.o.sendBatch(target, messages);
  }
}
