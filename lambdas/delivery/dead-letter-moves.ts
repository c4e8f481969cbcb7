/**
 * Dead-letter moves: a message out of retries is sent to the consumer's dead-letter queue as a new
 * message before its original is removed, or dropped without one (DL-07). Bodies come from the
 * runner, which alone holds them; ids, attempts and receipt handles from the Host's records.
 */
import { newToken } from '../engine/ids.ts';
import { crashPoint } from '../shared/crash-points.ts';
import { log } from '../shared/log.ts';
import { sendCopies } from './copy-sends.ts';
import type { DeliveryContext } from './delivery-context.ts';
import type { BatchHead, Manifest, ManifestEntry } from './delivery-store.ts';
import { type Envelope, encodeEnvelope } from './envelope.ts';
import { pendingIds } from './finalization.ts';
import { MESSAGE_LIMITS, NamedError, recordExpiry } from './limits.ts';
import type { QueueTarget } from './ports.ts';
import { returnNow } from './queue-requests.ts';

/** A body the runner holds for a dead-letter move the Host asked for (by message id). */
export interface DeadLetterItem {
  id: string;
  body: Uint8Array;
}

/** A dead-letter move SQS refused is tried again when the message returns, this much later. */
const MOVE_RETRY_SECONDS = 10;

/** A copy on its way to the dead-letter queue. */
interface Outgoing {
  entry: ManifestEntry;
  copyId: string;
  body: string;
  delay: number;
}

/** How a moved message's last delivery ended, for its dead-letter record (`threw`, `returned/retry`). */
function lastOutcomeOf(head: BatchHead, manifest: Manifest, id: string): string {
  const index = manifest.entries.findIndex((m) => m.id === id);
  // A move in the manifest was out of retries when it arrived: its last delivery was earlier.
  if (index < 0) return 'out of retries on arrival';
  const code = head.settled[String(index)] ?? head.all;
  const outcome = head.outcome ?? 'abandoned';
  return code?.startsWith('r') ? `${outcome}/retry` : outcome;
}

export class DeadLetterMoves {
  private readonly c: DeliveryContext;

  constructor(c: DeliveryContext) {
    this.c = c;
  }

  /**
   * The runner's half of a dead-letter move: bodies for messages the Host itself asked to move
   * (by id, from `finalize`); ids, attempts and receipt handles come from the Host's records,
   * never from the caller. `last` ends the batch and frees its slot.
   */
  async deadLetterAsRunner(
    batchId: string,
    credential: string,
    items: DeadLetterItem[],
    last: boolean,
  ): Promise<void> {
    const head = await this.c.ownedHead(batchId, credential);
    const manifest: Manifest = (await this.c.o.store.getManifest(head)) ?? { entries: [], moves: [] };
    const pending = new Set(pendingIds(head, manifest));
    if (!head.applied || head.recovering || items.some((i) => !pending.has(i.id))) {
      throw new NamedError('unknown_batch', 'these messages are not owed a move by this batch');
    }
    const byId = new Map([...manifest.entries, ...manifest.moves].map((m) => [m.id, m]));
    const bodies = new Map(items.map((i) => [i.id, i.body]));
    await this.moveToDeadLetter(
      head,
      [...bodies].map(([id, body]) => ({
        entry: byId.get(id) as ManifestEntry,
        body,
        lastOutcome: lastOutcomeOf(head, manifest, id),
      })),
    );
    if (last) {
      // Owed moves the runner did not send go back to the queue and are moved on their return.
      const left = [...pending].filter((id) => !bodies.has(id)).map((id) => byId.get(id) as ManifestEntry);
      const queue = await this.c.queueTarget(head.queueUid);
      if (queue && left.length > 0)
        await this.c.releaseVisibility(queue.sqsUrl, returnNow(left), 'unsent moves');
      await this.c.o.store.markApplied(batchId, []);
      await this.c.o.store.releaseSlot(head.consumerUid, batchId);
    }
  }

  /**
   * Moves messages to the consumer's dead-letter queue as new messages (new id, new timestamp,
   * attempts 1), durably there before the originals are removed; drops them without one (DL-07).
   * A message whose move fails stays in its queue with its record and is moved when it returns;
   * the rest of the batch is not affected. Without an attachment nothing is moved or dropped.
   */
  private async moveToDeadLetter(
    head: BatchHead,
    items: { entry: ManifestEntry; body: Uint8Array; lastOutcome: string }[],
  ): Promise<void> {
    if (items.length === 0) return;
    const a = await this.c.consumer(head.consumerUid);
    const queue = await this.c.queueTarget(head.queueUid);
    if (!queue) return; // the queue is gone, and its messages with it
    const keep = (kept: ManifestEntry[], why: string, codes: string[] = []) => {
      if (kept.length === 0) return Promise.resolve(new Set<string>());
      log.warn(`dead-letter move postponed: ${why}`, {
        consumerUid: head.consumerUid,
        messages: kept.length,
        retryInSeconds: MOVE_RETRY_SECONDS,
        ...(codes.length > 0 ? { codes } : {}),
      });
      const hidden = this.c.changeVisibility(
        queue.sqsUrl,
        kept.flatMap((m) => (m.handles ?? []).map((handle) => ({ handle, seconds: MOVE_RETRY_SECONDS }))),
      );
      return hidden.then(async (failed) => {
        await this.c.o.delivery.hidden(head.consumerUid, head.generation, [MOVE_RETRY_SECONDS]);
        return failed;
      });
    };
    if (!a) {
      // The consumer was deleted meanwhile: its messages stay where they are (QC-08).
      await keep(
        items.map((i) => i.entry),
        'the consumer is gone',
      );
      return;
    }
    const dlqUid = a.spec.deadLetterQueue?.resourceUid;
    const dlq = dlqUid ? await this.c.queueTarget(dlqUid) : undefined;
    if (dlqUid && !dlq) {
      await keep(
        items.map((i) => i.entry),
        'the dead-letter queue is not available',
      );
      return;
    }
    let done: ManifestEntry[] = items.map((i) => i.entry);
    if (dlq) {
      done = [];
      const now = this.c.now();
      const outgoing = items.map((item) => {
        const delay = dlq.defaultDelaySeconds;
        const env: Envelope = { id: `m${newToken(16)}`, ts: now, body: item.body };
        if (delay > MESSAGE_LIMITS.sqsMaxDelaySeconds) env.notBefore = now + delay * 1000;
        return {
          entry: item.entry,
          copyId: env.id,
          lastOutcome: item.lastOutcome,
          body: encodeEnvelope(env),
          delay: Math.min(delay, MESSAGE_LIMITS.sqsMaxDelaySeconds),
        };
      });
      // Where each copy came from, for operators (`dlq peek`); written first, so a copy never
      // exists without it. A record whose copy is never sent is harmless and expires.
      try {
        await this.c.o.store.putDeadLetterRecords(
          dlq.queueUid,
          outgoing.map((o) => ({
            copyId: o.copyId,
            record: {
              sourceQueueUid: queue.queueUid,
              sourceQueueName: queue.queueName,
              originalId: o.entry.id,
              attempts: o.entry.attempts,
              lastOutcome: o.lastOutcome,
              movedAt: now,
            },
          })),
          Math.ceil(now / 1000) + dlq.retentionSeconds + dlq.defaultDelaySeconds + 86_400,
        );
      } catch (err) {
        // An aid for operators, not part of the move: the move goes on without it.
        log.warn('dead-letter records could not be written', { consumerUid: head.consumerUid, err });
      }
      const { moved, refused, codes } = await this.sendMoves(head.consumerUid, dlq, outgoing);
      done.push(...moved);
      crashPoint('delivery.after-dead-letter-send');
      if (done.length > 0) await this.c.o.delivery.sent(dlq.queueUid);
      await keep(refused, 'the dead-letter queue refused messages', codes);
    } else {
      for (const m of done)
        log.info('message dropped after its last delivery (the consumer has no dead-letter queue)', {
          consumerUid: head.consumerUid,
          queueUid: head.queueUid,
          messageId: m.id,
          attempts: m.attempts,
        });
    }
    const failed = await this.c.deleteMessages(
      queue.sqsUrl,
      done.flatMap((m) => m.handles ?? []),
    );
    // A recovery that ran while this move waited on SQS (past the slot's deadline) may have
    // returned an original before its delete, which then removed nothing (a receipt handle of a
    // message received again deletes nothing, on SQS as on its stand-in). Recovery fences the
    // batch before it returns anything, so the head read after the delete tells.
    const fresh = await this.c.o.store.getHead(head.batchId);
    const owed = new Set(fresh && !fresh.recovering ? fresh.pendingDeadLetter : []);
    const expires = recordExpiry(this.c.now());
    for (const m of done) {
      if ((m.handles ?? []).some((h) => failed.has(h)) || !owed.has(m.id)) {
        // The original could not be removed and will come back: its fate is final (moved or
        // dropped), so it is deleted on sight, never delivered again as a first attempt (DL-07).
        await this.c.o.store.putAttempts(
          head.queueUid,
          { id: m.id, attempts: m.attempts, acked: true },
          expires,
        );
      } else await this.c.o.store.clearAttempts(head.queueUid, m.id);
    }
  }

  /**
   * Sends the copies (`copy-sends.ts`: split by bytes as well as by count, at most once each,
   * entries SQS failed on its side sent again) and sorts their originals into moved and refused,
   * with what SQS said of each refused one.
   */
  private async sendMoves(
    consumerUid: string,
    dlq: QueueTarget,
    outgoing: readonly Outgoing[],
  ): Promise<{ moved: ManifestEntry[]; refused: ManifestEntry[]; codes: string[] }> {
    // At most once: a copy whose send lost its answer is never sent a second time with the same
    // id (its own count of deliveries from 1 in the dead-letter queue); the move is postponed and
    // made again with new ids — a duplicate at worst (DL-07).
    const out = await sendCopies(
      this.c.o.messages,
      dlq.sqsUrl,
      outgoing,
      (o) => ({ body: o.body, delaySeconds: o.delay }),
      { message: 'the dead-letter queue refused a request', fields: { consumerUid } },
    );
    for (const o of out.sent) {
      log.info('message moved to the dead-letter queue', {
        consumerUid,
        messageId: o.entry.id,
        attempts: o.entry.attempts,
        deadLetterQueueUid: dlq.queueUid,
        copyId: o.copyId,
      });
    }
    return {
      moved: out.sent.map((o) => o.entry),
      refused: out.refused.map((o) => o.entry),
      codes: [...new Set(out.codes)],
    };
  }
}
