/**
 * A send that must not leave two copies of one Host message in SQS. A standard queue has no
 * deduplication: when the answer to a `SendMessage` is lost after SQS took it (a connection reset
 * under the response, a 5xx sent after the write), the SDK's retry sends a second copy, with the
 * same Host message id and its own count of deliveries — a message delivered as attempt 1 twice.
 *
 * This middleware sits inside the SDK's retry loop (the `deserialize` step, below
 * `retryMiddleware`) and remembers whether an earlier try of this command may have reached SQS.
 * A later try is then refused with `SendOutcomeUnknown`, which the retry strategy does not retry,
 * so the caller hears that the outcome is unknown instead of having a second copy sent. Tries
 * that certainly took no effect (a 4xx refusal such as throttling, a connection never made) are
 * retried as before.
 */
import type { SendMessageBatchCommand, SendMessageCommand } from '@aws-sdk/client-sqs';
import { SEND_OUTCOME_UNKNOWN } from '../../delivery/ports.ts';

/** Connection errors raised before a request was written: it cannot have reached SQS. */
const NEVER_SENT = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH']);

/** Whether a try that ended with `err` may have taken effect at SQS. */
export function mayHaveTakenEffect(err: unknown): boolean {
  const e = err as { $metadata?: { httpStatusCode?: number }; code?: string; name?: string };
  const status = e?.$metadata?.httpStatusCode;
  if (status !== undefined) return status >= 500;
  if (e?.code !== undefined && NEVER_SENT.has(e.code)) return false;
  return true;
}

export class SendOutcomeUnknownError extends Error {
  /**
   * What ended the earlier try. Not `cause`: the SDK's classifier follows `cause` and would call
   * this error transient, and retry it.
   */
  readonly earlierTry: unknown;

  constructor(earlierTry: unknown) {
    super(
      'SQS may have taken the message, but its answer was lost; it was not sent again, so that no second copy exists',
    );
    this.name = SEND_OUTCOME_UNKNOWN;
    this.earlierTry = earlierTry;
  }
}

type Next = (args: unknown) => Promise<unknown>;

/** Adds the guard to one command; each command gets its own memory of its tries. */
export function sendAtMostOnce<C extends SendMessageCommand | SendMessageBatchCommand>(command: C): C {
  let earlier: { error?: unknown } | undefined;
  const guard = (next: Next) => async (args: unknown) => {
    if (earlier) throw new SendOutcomeUnknownError(earlier.error);
    try {
      const out = await next(args);
      // Answered: a lost answer above this point still means SQS took it.
      earlier = {};
      return out;
    } catch (err) {
      if (mayHaveTakenEffect(err)) earlier = { error: err };
      throw err;
    }
  };
  (command as SendMessageCommand).middlewareStack.add(guard as never, {
    step: 'deserialize',
    priority: 'high',
    name: 'takoformSendAtMostOnce',
  });
  return command;
}
