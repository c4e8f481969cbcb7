/**
 * Visibility changes and deletes as delivery makes them: split into batch requests of at most
 * ten entries, all sent at once (at batch size 100 one round trip, not ten), and entries the queue
 * service failed on its side sent again for about 1.5 s — a message meant to return now would
 * otherwise stay hidden until its batch's visibility runs out (minutes, with default settings).
 */
import { log } from '../shared/log.ts';
import type { EntryFailure, MessageQueue } from './ports.ts';
import { byCount } from './sqs-batches.ts';

/** A receipt handle and the visibility (seconds from now) it is to get. */
export interface Visibility {
  handle: string;
  seconds: number;
}

/** Handles not done, and those of them the service never took (an outage, not a refusal). */
export interface RequestsOutcome {
  failed: Set<string>;
  unsent: number;
  notTaken: Set<string>;
}

/** Tries of one batch request for entries the service failed on its side (about 1.5 s in all). */
const BATCH_TRIES = 5;

export function changeVisibility(
  queue: MessageQueue,
  url: string,
  items: Visibility[],
): Promise<RequestsOutcome> {
  return inBatchRequests(
    items,
    (v) => v.handle,
    (entries) => queue.changeVisibilityBatch(url, entries),
    'could not change message visibility; it returns on its own',
  );
}

export function deleteMessages(
  queue: MessageQueue,
  url: string,
  handles: string[],
): Promise<RequestsOutcome> {
  return inBatchRequests(
    handles,
    (h) => h,
    (entries) => queue.deleteBatch(url, entries),
    'could not delete messages',
  );
}

/** Every copy of these messages visible again now. */
export function returnNow(messages: { handles?: string[] }[]): Visibility[] {
  return messages.flatMap((m) => (m.handles ?? []).map((handle) => ({ handle, seconds: 0 })));
}

async function inBatchRequests<T>(
  items: T[],
  handleOf: (item: T) => string,
  send: (entries: T[]) => Promise<EntryFailure[]>,
  warning: string,
): Promise<RequestsOutcome> {
  const failed = new Set<string>();
  const notTaken = new Set<string>();
  const parts = await Promise.all(byCount(items).map((part) => batchEntries(part, send)));
  for (const out of parts) {
    const left = [...out.refused, ...out.unsent];
    if (left.length > 0) log.warn(warning, { entries: left.length });
    for (const item of left) failed.add(handleOf(item));
    for (const item of out.unsent) notTaken.add(handleOf(item));
  }
  return { failed, unsent: notTaken.size, notTaken };
}

/**
 * One batch request, sent again for the entries that failed on the service's side (or all of
 * them, after an error the SDK's own retries did not outlive); returns the entries that never went.
 */
async function batchEntries<T>(
  entries: T[],
  send: (entries: T[]) => Promise<EntryFailure[]>,
): Promise<{ refused: T[]; unsent: T[] }> {
  const refused: T[] = [];
  let pending = entries;
  for (let attempt = 1; ; attempt++) {
    let retry = pending;
    try {
      const failed = await send(pending);
      const entryOf = (f: EntryFailure) => pending[f.index] as T;
      refused.push(...failed.filter((f) => f.senderFault).map(entryOf));
      retry = failed.filter((f) => !f.senderFault).map(entryOf);
    } catch (err) {
      if (attempt >= BATCH_TRIES) log.warn('an SQS batch call failed', { err });
    }
    if (retry.length === 0 || attempt >= BATCH_TRIES) return { refused, unsent: retry };
    pending = retry;
    await new Promise((r) => setTimeout(r, 50 * 2 ** attempt));
  }
}
