/**
 * Sending copies of messages the Host already holds — dead-letter moves and deferrals — at most
 * once each: a copy whose answer was lost is never sent again with the same body, since it may be
 * in the queue already (the caller postpones or leaves the original instead). Entries SQS failed on
 * its own side were definitely not enqueued, so they are sent again at once, a few times, before
 * they count as refused: a transient InternalError would otherwise hold a message back until it
 * returns.
 */
import { log } from '../shared/log.ts';
import type { EntryFailure, MessageQueue } from './ports.ts';
import { bySendLimits } from './sqs-batches.ts';

/** Sends of one request's copies while SQS fails entries on its side (about 0.7 s in all). */
export const COPY_SEND_TRIES = 4;

export interface CopySend {
  body: string;
  delaySeconds: number;
}

export interface CopiesSent<T> {
  sent: T[];
  /** Not enqueued, or not known to be: the originals stay. */
  refused: T[];
  /** What SQS said of the entries it refused for good. */
  codes: string[];
}

/**
 * Sends `items` as copies (`copyOf`) to `sqsUrl`, in requests within SQS's count and byte limits.
 * A request that fails whole refuses its part (`what` names it in the log); the others go on.
 */
export async function sendCopies<T>(
  messages: Pick<MessageQueue, 'sendBatch'>,
  sqsUrl: string,
  items: readonly T[],
  copyOf: (item: T) => CopySend,
  what: { message: string; fields: Record<string, unknown> },
): Promise<CopiesSent<T>> {
  const out: CopiesSent<T> = { sent: [], refused: [], codes: [] };
  for (const part of bySendLimits(items, (i) => copyOf(i).body)) {
    let pending = [...part];
    for (let attempt = 1; pending.length > 0; attempt++) {
      let failures: EntryFailure[];
      try {
        ({ failed: failures } = await messages.sendBatch(sqsUrl, pending.map(copyOf), { atMostOnce: true }));
      } catch (err) {
        log.warn(what.message, { ...what.fields, messages: pending.length, err });
        out.refused.push(...pending);
        break;
      }
      const failed = new Map(failures.map((f) => [f.index, f]));
      const again: T[] = [];
      for (const [n, item] of pending.entries()) {
        const f = failed.get(n);
        if (!f) out.sent.push(item);
        else if (!f.senderFault && attempt < COPY_SEND_TRIES) again.push(item);
        else {
          out.refused.push(item);
          out.codes.push(f.code ?? (f.senderFault ? 'SenderFault' : 'ServiceFault'));
        }
      }
      pending = again;
      if (pending.length > 0) await new Promise((r) => setTimeout(r, 50 * 2 ** attempt));
    }
  }
  return out;
}
