/**
 * What a receive brought, decided message by message before anything is written: delivered now
 * with its next attempt number, hidden until it is due (a delay, a retry delay, a send whose commit
 * has not landed yet), deferred when it is due much later (sent again as a delayed copy), owed a dead-letter move (out of retries on arrival), or removed (an
 * uncommitted send past its timeout, an acknowledged copy seen again, or a stray copy of a send
 * SQS took twice). Pure: registration applies the answer.
 */
import { visibilityLeft } from './delivery-context.ts';
import type { AttemptsRecord, ManifestEntry } from './delivery-store.ts';
import type { OnlyCopies } from './ports.ts';
import type { Visibility } from './queue-requests.ts';
import type { Received } from './registration.ts';

export interface ReceiveFacts {
  /** Commits of multi-message sends known to be complete. */
  committed: ReadonlySet<string>;
  /** The copies those commits name (`OnlyCopies`), by commit id: only one copy of each is delivered. */
  onlyCopies?: ReadonlyMap<string, OnlyCopies>;
  /** Attempts records of the received ids (none for a message never retried). */
  records: ReadonlyMap<string, AttemptsRecord>;
  now: number;
  maxRetries: number;
  /** Messages of a send not committed after this long are discarded (their producer failed). */
  commitTimeoutMs: number;
  /** Messages due this long or more from now are deferred rather than hidden (`deferrals.ts`). */
  deferAfterMs: number;
}

export interface ReceiveDecisions {
  /** Receipt handles to hide, and for how long. */
  hide: Visibility[];
  /**
   * Messages due later than `deferAfterMs` (the first copy's index into the received list, every
   * copy's handle, when it is due): left to return by themselves, for the runner to defer with
   * their bodies (one per Host id).
   */
  defer: { received: number; notBefore: number; handles: string[] }[];
  /** Receipt handles to delete. */
  remove: string[];
  /** Acknowledged messages seen again: their records go once their copies are deleted. */
  removeAcked: { id: string; handles: string[] }[];
  /** Indexes into the received list, in batch order, with their attempt numbers. */
  deliver: { received: number; attempts: number }[];
  /** The manifest entries of what is delivered, in the same order. */
  entries: ManifestEntry[];
  /** Messages that already had their last delivery: moved when the batch is finalised. */
  moves: ManifestEntry[];
}

/** A commit still missing is looked at again this soon (the producer writes it after its sends). */
const UNCOMMITTED_HIDE_SECONDS = 2;

export function classifyReceived(received: readonly Received[], facts: ReceiveFacts): ReceiveDecisions {
  const out: ReceiveDecisions = {
    hide: [],
    defer: [],
    remove: [],
    removeAcked: [],
    deliver: [],
    entries: [],
    moves: [],
  };
  const { now } = facts;
  // A stray copy of a committed send is removed before anything is decided: it is not a
  // delivery of its message, which the copy the producer's answer named carries (DL-07).
  const stray = (r: Received) => {
    const commit = r.envelope.commit;
    if (commit === undefined || !facts.committed.has(commit)) return false;
    const only = facts.onlyCopies?.get(commit)?.[r.envelope.id];
    return only !== undefined && r.queueMessageId !== undefined && r.queueMessageId !== only;
  };
  for (const r of received) if (stray(r)) out.remove.push(r.receiptHandle);
  for (const { first, handles } of copiesOf(received.map((r) => (stray(r) ? undefined : r)))) {
    const r = received[first] as Received;
    const e = r.envelope;
    if (e.commit && !facts.committed.has(e.commit)) {
      // Timed by SQS's clock: a producer's clock (the customer's machine) may be off.
      if (now - (r.sentAt ?? e.ts) > facts.commitTimeoutMs) out.remove.push(...handles);
      else for (const handle of handles) out.hide.push({ handle, seconds: UNCOMMITTED_HIDE_SECONDS });
      continue;
    }
    const rec = facts.records.get(e.id);
    if (rec?.acked) {
      out.remove.push(...handles);
      out.removeAcked.push({ id: e.id, handles });
      continue;
    }
    const notBefore = Math.max(e.notBefore ?? 0, rec?.notBefore ?? 0);
    if (notBefore - now >= facts.deferAfterMs) {
      // Kept out of SQS's in-flight count: one delayed copy replaces it and its SQS duplicates
      // received with it (deferrals.ts).
      out.defer.push({ received: first, notBefore, handles });
      continue;
    }
    if (notBefore > now) {
      const seconds = Math.min(visibilityLeft(r.receivedAt, now), Math.ceil((notBefore - now) / 1000));
      for (const handle of handles) out.hide.push({ handle, seconds });
      continue;
    }
    const attempts = (rec?.attempts ?? 0) + 1;
    const entry = { id: e.id, ts: e.ts, hadRecord: rec !== undefined, handles, receivedAt: r.receivedAt };
    if (attempts > 1 + facts.maxRetries) {
      out.moves.push({ ...entry, attempts: rec?.attempts ?? 0 });
      continue;
    }
    out.deliver.push({ received: first, attempts });
    out.entries.push({ ...entry, attempts });
  }
  return out;
}

/**
 * An SQS duplicate of a message in this batch rides with its first copy: one decision, and every
 * copy is deleted, hidden or returned with it. Copies already removed are left out (undefined).
 */
function copiesOf(received: readonly (Received | undefined)[]): { first: number; handles: string[] }[] {
  const copies = new Map<string, { first: number; handles: string[] }>();
  for (const [i, r] of received.entries()) {
    if (!r) continue;
    const c = copies.get(r.envelope.id);
    if (c) c.handles.push(r.receiptHandle);
    else copies.set(r.envelope.id, { first: i, handles: [r.receiptHandle] });
  }
  return [...copies.values()];
}
