import type { QueueStats } from '../adapters/aws/sqs-queue-backend.ts';
import type { Attachment } from '../forms/queue-consumer/attachments.ts';
import type { QueueHistory } from '../operator/queue-history.ts';
import { log } from '../shared/log.ts';
import { Periodic } from './periodic.ts';

export interface SamplerDeps {
  history: QueueHistory;
  attachments: {
    listActive(): Promise<{ consumerUid: string }[]>;
    get(consumerUid: string): Promise<Attachment | undefined>;
  };
  stats(queueUid: string): Promise<QueueStats | undefined>;
}

/** Queues sampled per round at most (the history keeps no more either). */
const MAX_QUEUES_PER_ROUND = 500;

/**
 * The local Host's sampler for the console's chart: every `periodMs`, the counts of each queue a
 * consumer reads or dead-letters into, and of each queue the console asked about. A queue whose
 * SQS queue is gone is forgotten.
 */
export class QueueHistorySampler {
  private readonly timer: Periodic;
  private readonly deps: SamplerDeps;

  constructor(deps: SamplerDeps, periodMs: number) {
    this.deps = deps;
    this.timer = new Periodic(
      () => this.sampleOnce().catch((err) => log.warn('queue history sample failed', { err })),
      periodMs,
    );
  }

  start(): void {
    this.timer.start();
  }

  async stop(): Promise<void> {
    await this.timer.stop();
  }

  async sampleOnce(): Promise<void> {
    const { history, attachments, stats } = this.deps;
    const queues = new Set(history.watched());
    for (const { consumerUid } of await attachments.listActive()) {
      const spec = (await attachments.get(consumerUid))?.spec;
      if (!spec) continue;
      queues.add(spec.queue.resourceUid);
      if (spec.deadLetterQueue) queues.add(spec.deadLetterQueue.resourceUid);
    }
    for (const uid of [...queues].slice(0, MAX_QUEUES_PER_ROUND)) {
      const counts = await stats(uid);
      if (counts) history.record(uid, counts);
      else history.forget(uid);
    }
  }
}
