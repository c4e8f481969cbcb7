import { SETTLE_ERRORS } from './batch-host-protocol.ts';
import { NamedError } from './limits.ts';
import { SETTLE_GROUP_LIMIT, type SettleAnswer, type SettleCall } from './settlement-protocol.ts';

/** The two ways a batch's settle calls reach the Host. */
export interface SettleSender {
  one(call: SettleCall): Promise<void>;
  /** One answer per call, in order. */
  many(calls: SettleCall[]): Promise<SettleAnswer[]>;
}

interface Waiting {
  call: SettleCall;
  resolve: () => void;
  reject: (err: unknown) => void;
}

const rejectionOf = (answer: Exclude<SettleAnswer, 'ok'>) =>
  new NamedError(answer, SETTLE_ERRORS[answer] ?? 'the settlement could not be recorded');

/**
 * Coalesces one batch's settle calls: at most one Host call for them is in flight; the calls
 * made meanwhile (or in the same turn of the event loop) go together in the next one, in the
 * order they were made, at most `limit` per call. Under load a handler's hundred `ack()`s cost a
 * few Host calls, not a hundred concurrent ones (on AWS: synchronous Lambda invokes).
 *
 * Each Promise settles with its own call's answer: it resolves only once the Host recorded that
 * decision, and rejects with the error a lone call would get. A group that fails as a whole
 * rejects every call in it with that error.
 */
export function coalescingSettle(
  sender: SettleSender,
  limit = SETTLE_GROUP_LIMIT,
): (call: SettleCall) => Promise<void> {
  const queue: Waiting[] = [];
  let busy = false;

  const send = async (group: Waiting[]) => {
    const [only] = group;
    if (group.length === 1 && only) {
      // A lone call keeps the single-call request (and its answers) exactly as before.
      await sender.one(only.call).then(only.resolve, only.reject);
      return;
    }
    let answers: SettleAnswer[];
    try {
      answers = await sender.many(group.map((w) => w.call));
    } catch (err) {
      for (const w of group) w.reject(err);
      return;
    }
    for (const [i, w] of group.entries()) {
      const answer = answers[i] ?? 'backend_unavailable';
      if (answer === 'ok') w.resolve();
      else w.reject(rejectionOf(answer));
    }
  };

  const flush = async () => {
    const group = queue.splice(0, limit);
    try {
      await send(group);
    } finally {
      busy = false;
      schedule();
    }
  };

  // setImmediate, not a microtask: calls a handler makes in one go (also those arriving as
  // separate messages from a worker thread) are all queued before the group leaves.
  const schedule = () => {
    if (busy || queue.length === 0) return;
    busy = true;
    setImmediate(() => void flush());
  };

  return (call) =>
    new Promise<void>((resolve, reject) => {
      queue.push({ call, resolve, reject });
      schedule();
    });
}
