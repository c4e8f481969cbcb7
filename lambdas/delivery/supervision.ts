/**
 * One supervision round over every active consumer: the control loop's periodic part. The AWS
 * supervisor Lambda runs it every minute; the local Host runs the same function on a timer. Per
 * consumer it recovers batches whose slot deadline passed, reads the queue's visible backlog, and
 * lets the control loop start lanes for a backlog no lane is receiving (messages sent straight
 * to SQS, and lanes lost to failures). It also sums the backlog and the dead-letter depth, which
 * the AWS alarms watch.
 */
import type { Attachment, AttachmentStore } from '../forms/queue-consumer/attachments.ts';
import { log } from '../shared/log.ts';
import type { ControlLoop } from './control-loop.ts';
import type { MessageQueue, QueueDirectory, QueueTarget } from './ports.ts';

export interface SupervisionDeps {
  loop: ControlLoop;
  attachments: Pick<AttachmentStore, 'get'> & {
    listActive(): Promise<{ consumerUid: string; generation: number }[]>;
  };
  queueDirectory: QueueDirectory;
  messages: Pick<MessageQueue, 'counts'>;
  /** Runs before a consumer's queue is read (the AWS supervisor tags old queues here). */
  beforeQueue?: (queue: QueueTarget) => Promise<void>;
}

export interface SupervisionResult {
  consumers: number;
  started: number;
  recovered: number;
  backlog: number;
  deadLetter: number;
}

async function superviseConsumer(
  deps: SupervisionDeps,
  a: Attachment,
  result: SupervisionResult,
  roundAt: number,
) {
  const spec = a.spec;
  const dlqUid = spec.deadLetterQueue?.resourceUid;
  const dlq = dlqUid ? await deps.queueDirectory.queue(dlqUid) : undefined;
  if (dlq) {
    const c = await deps.messages.counts(dlq.sqsUrl);
    result.deadLetter += c.visible + c.delayed;
  }
  const queue = await deps.queueDirectory.queue(spec.queue.resourceUid);
  if (queue) await deps.beforeQueue?.(queue);
  const r = await deps.loop.superviseConsumer(
    {
      consumerUid: a.consumerUid,
      generation: a.generation,
      maxBatchSize: spec.maxBatchSize,
      maxConcurrency: spec.maxConcurrency,
    },
    async () => (queue ? (await deps.messages.counts(queue.sqsUrl)).visible : 0),
    roundAt,
  );
  result.backlog += r.visible;
  result.recovered += r.recovered;
  result.started += r.started;
}

/**
 * The round of one consumer right after its generation became active (an update or a create
 * applied): lanes for its backlog now, rather than at the supervisor's next round. Its old
 * generation's batches still count against the bound; their lanes go on as lanes of the new
 * generation when they next take a slot (`SlotDesk.acquire`). Never throws.
 */
export async function superviseActivated(
  deps: Pick<SupervisionDeps, 'loop' | 'queueDirectory' | 'messages'>,
  a: Attachment,
  now: number,
): Promise<void> {
  try {
    const queue = await deps.queueDirectory.queue(a.spec.queue.resourceUid);
    if (!queue) return;
    const r = await deps.loop.superviseConsumer(
      {
        consumerUid: a.consumerUid,
        generation: a.generation,
        maxBatchSize: a.spec.maxBatchSize,
        maxConcurrency: a.spec.maxConcurrency,
      },
      async () => (await deps.messages.counts(queue.sqsUrl)).visible,
      now,
      { activated: true },
    );
    if (r.started > 0)
      log.info('lanes start for a consumer generation', { consumerUid: a.consumerUid, ...r });
  } catch (err) {
    log.warn('could not start the lanes of a consumer generation; the supervisor will', {
      consumerUid: a.consumerUid,
      err,
    });
  }
}

/**
 * `roundAt` (epoch ms) is the time the round was scheduled for: it names the lanes the round
 * starts, so a round delivered twice starts them once.
 */
export async function superviseRound(deps: SupervisionDeps, roundAt: number): Promise<SupervisionResult> {
  const active = await deps.attachments.listActive();
  const result: SupervisionResult = {
    consumers: active.length,
    started: 0,
    recovered: 0,
    backlog: 0,
    deadLetter: 0,
  };
  for (const { consumerUid } of active) {
    try {
      const a = await deps.attachments.get(consumerUid);
      if (a?.state !== 'active') continue;
      await superviseConsumer(deps, a, result, roundAt);
    } catch (err) {
      // One consumer's trouble never stops the others; the next round tries again.
      log.warn('supervision of a consumer failed', { consumerUid, err });
    }
  }
  return result;
}
