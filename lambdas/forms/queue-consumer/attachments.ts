import type { ConsumerSpec } from './consumer-spec.ts';

/**
 * The seam between the control plane and delivery: an attachment is what the dispatcher acts on.
 * The QueueConsumer backend writes it; the delivery engine reads it and reports in-flight work.
 */
export interface Attachment {
  consumerUid: string;
  space: string;
  /** The queue Resource's name, as the batch object shows it. */
  queueName: string;
  generation: number;
  spec: ConsumerSpec;
  /** `stopping`: no new batch may start; in-flight ones finish or become redeliverable. */
  state: 'active' | 'stopping';
}

export interface AttachmentStore {
  /** Writes the attachment for a generation; an older generation never replaces a newer one. */
  activate(a: Attachment): Promise<void>;
  get(consumerUid: string): Promise<Attachment | undefined>;
  /** Sets the stop boundary: after it resolves, no new batch starts for this consumer. */
  stop(consumerUid: string): Promise<void>;
  remove(consumerUid: string): Promise<void>;
}

/** A fence that admits no generation: set at a stop (QC-08). */
export const STOPPED = Number.MAX_SAFE_INTEGER;

export interface DeliveryMonitor {
  /**
   * From now on no batch of a generation below `closedBelow` starts, even in a slot taken before
   * (`STOPPED` at a stop; the new generation at an update). `maxConcurrency` is the replaced
   * generation's: the slots it may have. Safe to repeat.
   */
  fence(consumerUid: string, closedBelow: number, maxConcurrency: number): Promise<void>;
  /** Batches of this consumer that started and have not ended (or been made redeliverable). */
  inFlightBatches(consumerUid: string): Promise<number>;
  /**
   * Told before an update's generation replaces the active one: the slots that hold no batch are
   * freed. None of them can hold one once the replaced generation is fenced off (`fence`), yet
   * each would count against the new maxConcurrency until its deadline.
   */
  replacing(consumerUid: string): Promise<void>;
  /**
   * Told once a generation is active (a create or an update applied): delivery starts its lanes
   * for a backlog now rather than at the supervisor's next round. Never throws.
   */
  activated?(a: Attachment): Promise<void>;
}
