/**
 * Deferrals: a message received long before it is due (a retry delay, a producer's delay past
 * SQS's 900 s) is sent again as a delayed copy — same Host id, timestamp and `notBefore` — and its
 * original deleted once the copy is in the queue, instead of being hidden by a visibility timeout.
 * SQS counts a hidden message as in flight (about 120,000 per standard queue; past that, receives
 * come back empty while the queue holds messages) and a delayed one not at all.
 *
 * Registration decides which messages are deferred (`classifyReceived`) and leaves them to
 * return after the receive's short visibility; the runner, which alone holds the bodies, brings
 * them here. Whatever is not deferred (the copy refused, the call lost) returns by itself and is
 * decided again on its next receive: nothing is lost, and a copy sent whose original then
 * survived is a duplicate at worst (at-least-once allows it; DL-07 counts attempts by Host id).
 */
import { log } from '../shared/log.ts';
import { sendCopies } from './copy-sends.ts';
import type { DeliveryContext } from './delivery-context.ts';
import { encodeEnvelope } from './envelope.ts';
import { MESSAGE_LIMITS, NamedError } from './limits.ts';
import type { Slot } from './slots.ts';

/**
 * Messages due later than this are deferred; sooner, hidden (and in flight for at most this long).
 * At this bound a queue reaches SQS's in-flight limit only past 2,000 retried messages a second.
 */
export const DEFER_AFTER_MS = 60_000;

/** A message the runner received before it was due, with its body (registration's `defer`). */
export interface DeferItem {
  /** Every SQS copy the receive brought: one delayed copy replaces them all. */
  receiptHandles: string[];
  id: string;
  ts: number;
  notBefore: number;
  body: Uint8Array;
}

/** Furthest a `notBefore` may lie ahead: the longest delay the Host accepts, and clock skew. */
const FURTHEST_MS = (MESSAGE_LIMITS.maxDelaySeconds + 60) * 1000;

export class Deferrals {
  private readonly c: DeliveryContext;

  constructor(c: DeliveryContext) {
    this.c = c;
  }

  /**
   * Sends the delayed copies and deletes the originals whose copy SQS took. The slot must carry
   * the Host's seal (DL-09); its queue is where both copies and originals are. An item due later
   * than the longest delay the Form allows refuses the call, so it can neither move a message to
   * another queue nor keep one away longer than a delay could.
   */
  async deferAsRunner(claimed: Slot, items: DeferItem[]): Promise<{ deferred: number }> {
    const slot = this.c.trusted(claimed);
    const now = this.c.now();
    for (const i of items)
      if (i.notBefore - now > FURTHEST_MS)
        throw new NamedError('unknown_message', `message ${i.id} is due later than the longest delay`);
    // Registration found them due at least `deferAfterMs` later; one that is due by now (a slow
    // call) is left to return by itself and be delivered.
    const outgoing = items
      .filter((i) => i.notBefore > now)
      .map((i) => ({
        item: i,
        body: encodeEnvelope({ id: i.id, ts: i.ts, body: i.body, notBefore: i.notBefore }),
        delay: Math.min(MESSAGE_LIMITS.sqsMaxDelaySeconds, Math.ceil((i.notBefore - now) / 1000)),
      }));
    // At most once: a copy whose answer was lost is not sent a second time; its original stays
    // and is deferred again when it returns.
    const { sent } = await sendCopies(
      this.c.o.messages,
      slot.sqsUrl,
      outgoing,
      (o) => ({ body: o.body, delaySeconds: o.delay }),
      {
        message: 'could not defer messages; they are hidden when they return',
        fields: { consumerUid: slot.consumerUid },
      },
    );
    if (sent.length === 0) return { deferred: 0 };
    const notDeleted = await this.c.deleteMessages(
      slot.sqsUrl,
      sent.flatMap((o) => o.item.receiptHandles),
    );
    if (notDeleted.size > 0)
      log.warn('deferred messages whose original could not be deleted: they return as duplicates', {
        consumerUid: slot.consumerUid,
        messages: notDeleted.size,
      });
    await this.c.o.delivery.hidden(
      slot.consumerUid,
      slot.generation,
      sent.map((o) => o.delay),
    );
    return { deferred: sent.length };
  }
}
