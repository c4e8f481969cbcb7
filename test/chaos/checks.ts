/**
 * The checkers of a chaos run: pure functions from what was recorded (the workers' own logs,
 * the ids the Host accepted, the Host's batch heads and manifests read from DynamoDB) to
 * verdicts. docs/reliability.md says what each one proves.
 */
import type { SettleKind, WorkerRecord } from './chaos-worker.ts';
import type { BatchView, HeadItem, ManifestItem } from './host-state.ts';

/** A message the Host accepted (a 200 answer with its id). */
export interface Accepted {
  id: string;
  seq: number;
  body: string;
}

/**
 * One update of the main consumer's maxConcurrency: accepted by the Host at `acceptedAt`, its
 * Operation succeeded at `succeededAt` (unset: not seen to succeed). Epoch ms.
 */
export interface ConcurrencyUpdate {
  maxConcurrency: number;
  acceptedAt: number;
  succeededAt?: number;
  /** The consumer generation the update made (unset: not known). */
  generation?: number;
}

export interface DeliveryEvidence {
  maxRetries: number;
  /** The main consumer's maxConcurrency at its creation. */
  maxConcurrency: number;
  /** Later updates of it, in order. */
  concurrencyUpdates?: ConcurrencyUpdate[];
  deadLetter: boolean;
  mainQueue: string;
  mainConsumerUid: string;
  deadLetterQueue?: string;
  deadLetterConcurrency?: number;
  accepted: Accepted[];
  /**
   * Bodies of send attempts the Host did not confirm (no answer, or an error), one per message
   * per attempt: such a message may be in the queue all the same, under an id no one was told.
   */
  unconfirmedBodies?: string[];
  records: WorkerRecord[];
  deadLetterRecords: WorkerRecord[];
  view: BatchView;
  /** Host pid → when it died (its handlers died with it). */
  deaths: Map<number, number>;
  workerTimeoutMs: number;
}

export interface DeliveryVerdict {
  sent: number;
  delivered: number;
  deliveries: number;
  duplicates: number;
  acked: number;
  deadLettered: number;
  deadLetterCopies: number;
  /** Dead letters of unconfirmed sends: exhausted in the manifests under ids no send answered. */
  unconfirmedDeadLettered: number;
  dropped: number;
  /** Exhausted messages whose last counted delivery no handler saw (the Host died after registering it). */
  exhaustedUnseen: number;
  lost: string[];
  /** Messages delivered whose send was not confirmed (a lost answer); not part of `sent`. */
  unconfirmedDelivered: number;
  flips: string[];
  breaches: string[];
  attemptAnomalies: string[];
  /**
   * Messages delivered more often than DL-07 allows before the Host acknowledged them: a delivery
   * whose attempts exceed 1 + maxRetries, or a second delivery of the same attempt (which a lost
   * answer can cause). Duplicates after an acknowledgement are counted in `duplicates` instead.
   */
  beyondRetries: string[];
  /** How many deliveries `beyondRetries` names in all. */
  excessDeliveries: number;
  /** A settlement's first call refused as `already_settled` (DL-03: only a second one is). */
  refusedFirstSettlements: string[];
  unknownSettlementAcked: string[];
  wrongOutcome: string[];
  conflicts: string[];
  unexplainedDeadLetters: string[];
  /** Batches a handler received that the Host has no head of. */
  orphanBatches: string[];
}

/** The decision the Host holds for one index of a closed batch; undefined while it is open. */
export function decisionOf(head: HeadItem, index: number): string | undefined {
  if (!head.closed) return undefined;
  return (
    head.settled[String(index)] ?? head.all ?? (head.outcome === 'returned' && !head.doubtful ? 'a' : 'r')
  );
}

/**
 * Whether a head last seen like this may disappear: open, unsettled and undecided. Registration
 * takes back such a head when its slot refuses the mark that follows it (a stop or an update
 * between the two writes), or when the registration came too late (`cancelBatch`): a batch that
 * never started. It is a flip all the same if a handler started the batch (the run's records
 * tell, at the end: `FlipWatcher.vanished`).
 */
export function mayBeTakenBack(before: HeadItem): boolean {
  return (
    !before.closed &&
    before.outcome === undefined &&
    before.all === undefined &&
    Object.keys(before.settled).length === 0
  );
}

/** Changes between two reads of one batch head that must never happen (settlements are final). */
export function compareHeads(before: HeadItem, after: HeadItem | undefined): string[] {
  const id = before.batchId;
  if (!after) return [`${id}: head disappeared`];
  const out: string[] = [];
  for (const [i, code] of Object.entries(before.settled)) {
    if (after.settled[i] !== code) out.push(`${id}[${i}]: ${code} became ${after.settled[i] ?? 'unsettled'}`);
  }
  if (before.all !== undefined && after.all !== before.all)
    out.push(`${id}: all ${before.all} became ${after.all ?? 'unset'}`);
  if (before.closed && !after.closed) out.push(`${id}: reopened`);
  if (before.outcome !== undefined && after.outcome !== before.outcome)
    out.push(`${id}: outcome ${before.outcome} became ${after.outcome ?? 'unset'}`);
  return out;
}

interface BatchLog {
  batch: string;
  queue: string;
  pid: number;
  start: number;
  /** The time of its latest record (heartbeats of a hanging handler included). */
  last: number;
  end?: { t: number; how: 'returned' | 'threw' };
  mode?: string;
  msgs: { i: number; id: string; a: number; body: string; t: number }[];
  results: { k: SettleKind; i?: number; r: string }[];
}

function batchLogs(records: WorkerRecord[]): Map<string, BatchLog> {
  const out = new Map<string, BatchLog>();
  for (const r of records) {
    if (r.ev === 'start') {
      out.set(r.b, { batch: r.b, queue: r.q, pid: r.p, start: r.t, last: r.t, msgs: [], results: [] });
      continue;
    }
    const log = out.get(r.b);
    if (!log) continue;
    log.last = Math.max(log.last, r.t);
    if (r.ev === 'msg') log.msgs.push({ i: r.i, id: r.id, a: r.a, body: r.body, t: r.t });
    else if (r.ev === 'mode') log.mode = r.m;
    else if (r.ev === 'res')
      log.results.push(r.i === undefined ? { k: r.k, r: r.r } : { k: r.k, i: r.i, r: r.r });
    else if (r.ev === 'end') log.end = { t: r.t, how: r.how };
  }
  return out;
}

/**
 * The maxConcurrency a handler starting at `t` is held to: the value of the last update that
 * succeeded before `t` (else the initial one), or, while an update is accepted and has not
 * succeeded yet, the larger of that and the update's own value.
 */
export function concurrencyBoundAt(
  initial: number,
  updates: readonly ConcurrencyUpdate[],
  t: number,
): number {
  let settled = initial;
  let settledAt = Number.NEGATIVE_INFINITY;
  for (const u of updates) {
    if (u.succeededAt !== undefined && u.succeededAt < t && u.succeededAt >= settledAt) {
      settled = u.maxConcurrency;
      settledAt = u.succeededAt;
    }
  }
  let bound = settled;
  for (const u of updates) {
    const pending = u.acceptedAt <= t && (u.succeededAt === undefined || u.succeededAt >= t);
    if (pending) bound = Math.max(bound, u.maxConcurrency);
  }
  return bound;
}

/**
 * The bound a handler of a batch of consumer generation `generation` (from its head) is held to
 * when it starts at `t`. The Host starts a batch when its registration commits, on condition that
 * the batch's generation is the active one, and the handler's first line runs later (the
 * visibility hold, the answer's way back, the worker thread): up to seconds later under faults.
 * So a batch of a generation that an update replaced was started before that update took effect,
 * and so before it succeeded; its handler may start after the success all the same. It is held
 * to the bound at its start or at that success, whichever is larger — and every handler running
 * counts against a later start, whatever its generation.
 */
export function concurrencyBoundOf(
  initial: number,
  updates: readonly ConcurrencyUpdate[],
  t: number,
  generation: number | undefined,
): number {
  const now = concurrencyBoundAt(initial, updates, t);
  if (generation === undefined) return now;
  let replacedAt = Number.POSITIVE_INFINITY;
  for (const u of updates) {
    if (u.generation !== undefined && u.generation > generation && u.succeededAt !== undefined)
      replacedAt = Math.min(replacedAt, u.succeededAt);
  }
  return replacedAt < t ? Math.max(now, concurrencyBoundAt(initial, updates, replacedAt)) : now;
}

/**
 * No handler of `queue` started while `max` (at its start; for its batch) or more of them ran,
 * whatever generation of the consumer started them. Each interval is start → end as the handler
 * recorded them. A handler with no end either hung — it beats every 20 ms until its thread is cut
 * off, so it ended just after its last beat — or died with its Host (at the latest when the
 * runner saw the Host exit).
 */
export function concurrencyBreaches(
  logs: Iterable<BatchLog>,
  queue: string,
  max: number | ((t: number, batch: string) => number),
  deaths: Map<number, number>,
  timeoutMs: number,
): string[] {
  const boundAt = typeof max === 'number' ? () => max : max;
  const edges: { t: number; d: 1 | -1; batch: string }[] = [];
  for (const l of logs) {
    if (l.queue !== queue) continue;
    const death = deaths.get(l.pid) ?? Number.POSITIVE_INFINITY;
    const end =
      l.end?.t ?? (l.mode === 'hang' ? Math.min(l.last, death) : Math.min(l.start + timeoutMs, death));
    // A handler that started and ended within one millisecond still ran: its end sorts after its start.
    edges.push(
      { t: l.start, d: 1, batch: l.batch },
      { t: Math.max(end, l.start + 0.5), d: -1, batch: l.batch },
    );
  }
  // At equal times an end counts before a start: the Host frees a slot only after the handler ended.
  edges.sort((a, b) => a.t - b.t || a.d - b.d);
  const out: string[] = [];
  const running = new Set<string>();
  for (const e of edges) {
    if (e.d === -1) running.delete(e.batch);
    else {
      running.add(e.batch);
      const bound = boundAt(e.t, e.batch);
      if (running.size > bound)
        out.push(
          `${queue} at ${new Date(e.t).toISOString()}: ${running.size} > ${bound} (${[...running].join(' ')})`,
        );
    }
  }
  return out;
}

/** One handler's delivery of a message. */
interface Seen {
  batch: string;
  i: number;
  /** Its attempts number as the handler saw it. */
  a: number;
  t: number;
  believedAck: boolean;
}

/** The first delivery a handler saw whose batch the Host decided `a` for that message. */
function firstAcknowledged(
  saw: readonly Seen[],
  counted: readonly { batch: string; index: number }[],
  heads: ReadonlyMap<string, HeadItem>,
): Seen | undefined {
  return [...saw]
    .sort((x, y) => x.t - y.t)
    .find((s) => {
      const head = heads.get(s.batch);
      const d = counted.find((c) => c.batch === s.batch);
      return head !== undefined && d !== undefined && decisionOf(head, d.index) === 'a';
    });
}

/**
 * A message's counted deliveries up to the one the Host acknowledged: those a handler saw no
 * later than it, and unseen ones with a lower attempts number (registered before it).
 */
function owedDeliveries<D extends { batch: string; index: number; attempts: number }>(
  deliveries: readonly D[],
  saw: readonly Seen[],
  heads: ReadonlyMap<string, HeadItem>,
): D[] {
  const acked = firstAcknowledged(saw, deliveries, heads);
  if (!acked) return [...deliveries];
  const ackedAttempts = deliveries.find((d) => d.batch === acked.batch)?.attempts ?? Number.POSITIVE_INFINITY;
  return deliveries.filter((d) => {
    const seen = saw.find((s) => s.batch === d.batch);
    return seen ? seen.t <= acked.t : d.attempts < ackedAttempts;
  });
}

/**
 * The deliveries of one message, in the order handlers saw them, that DL-07 does not allow
 * before the Host acknowledged it: attempts above `max`, or an attempts number seen before.
 * Deliveries after the first one the Host acknowledged are at-least-once duplicates, not these.
 */
function excessOf(
  saw: readonly Seen[],
  counted: readonly { batch: string; index: number }[],
  heads: ReadonlyMap<string, HeadItem>,
  max: number,
): { count: number; what: string } | undefined {
  const sorted = [...saw].sort((x, y) => x.t - y.t);
  const acked = firstAcknowledged(saw, counted, heads);
  const owed = acked ? sorted.filter((s) => s.t <= acked.t) : sorted;
  const seen = new Set<number>();
  let count = 0;
  for (const s of owed) {
    if (s.a > max || seen.has(s.a)) count++;
    seen.add(s.a);
  }
  if (count === 0) return undefined;
  return {
    count,
    what: `delivered as attempts ${owed.map((s) => s.a).join(',')} before its fate (each of 1..${max} at most once): ${count} beyond`,
  };
}

/**
 * Settle calls of one batch answered `already_settled` although no earlier call of the batch
 * settled that message (or the whole batch): a first settlement must be recorded or fail
 * otherwise (DL-03), e.g. not be refused because a retried write met its own first try.
 */
function refusedFirstCalls(l: BatchLog): string[] {
  const out: string[] = [];
  const touched = new Set<number>();
  let batchWide = false;
  for (const r of l.results) {
    // A batch-wide call after calls for single messages may find nothing left to settle.
    const first = r.i === undefined ? !batchWide && touched.size === 0 : !batchWide && !touched.has(r.i);
    if (r.r === 'already_settled' && first)
      out.push(
        `${l.batch}${r.i === undefined ? '' : `[${r.i}]`}: ${r.k} refused already_settled on its first call`,
      );
    if (r.i === undefined) {
      if (r.r === 'resolved' || r.r === 'already_settled') batchWide = true;
    } else touched.add(r.i);
  }
  return out;
}

const codeOfCall = (k: SettleKind, i: number | undefined): string =>
  k === 'ack' || k === 'ackAll' ? 'a' : k === 'retry' ? (i !== undefined && i % 2 === 0 ? 'r0' : 'r') : 'r0';

export function checkDelivery(e: DeliveryEvidence): DeliveryVerdict {
  const logs = batchLogs(e.records);
  const dlqLogs = batchLogs(e.deadLetterRecords);
  const acceptedIds = new Set(e.accepted.map((a) => a.id));
  const v: DeliveryVerdict = {
    sent: e.accepted.length,
    delivered: 0,
    deliveries: 0,
    duplicates: 0,
    acked: 0,
    deadLettered: 0,
    deadLetterCopies: 0,
    unconfirmedDeadLettered: 0,
    dropped: 0,
    exhaustedUnseen: 0,
    lost: [],
    unconfirmedDelivered: 0,
    flips: [],
    breaches: [],
    attemptAnomalies: [],
    beyondRetries: [],
    excessDeliveries: 0,
    refusedFirstSettlements: [],
    unknownSettlementAcked: [],
    wrongOutcome: [],
    conflicts: [],
    unexplainedDeadLetters: [],
    orphanBatches: [],
  };

  for (const l of dlqLogs.values()) if (!e.view.heads.has(l.batch)) v.orphanBatches.push(l.batch);
  // --- Per batch: settlements the worker saw resolve must be what the head holds (durable, final).
  for (const l of logs.values()) {
    const head = e.view.heads.get(l.batch);
    if (!head) {
      v.orphanBatches.push(l.batch);
      continue;
    }
    v.refusedFirstSettlements.push(...refusedFirstCalls(l));
    let firstAll: string | undefined;
    for (const r of l.results) {
      if (r.r === 'resolved') {
        if (r.k === 'ack' || r.k === 'retry') {
          const held = head.settled[String(r.i)];
          if (held !== codeOfCall(r.k, r.i))
            v.flips.push(`${l.batch}[${r.i}]: ${r.k} resolved but the head holds ${held ?? 'nothing'}`);
        } else {
          if (head.all === undefined)
            v.flips.push(`${l.batch}: ${r.k} resolved but the head holds no batch settlement`);
          else if (firstAll === undefined && head.all !== codeOfCall(r.k, undefined))
            v.flips.push(`${l.batch}: ${r.k} resolved first but the head holds ${head.all}`);
          firstAll ??= r.k;
        }
      } else if (r.r === 'backend_unavailable' && head.closed) {
        // DL-08: an unknown settlement is never taken as an acknowledgement.
        const idx = r.i === undefined ? [...Array(head.size).keys()] : [r.i];
        for (const i of idx) {
          const explicit = head.settled[String(i)] ?? head.all;
          if (explicit === undefined && decisionOf(head, i) === 'a')
            v.unknownSettlementAcked.push(`${l.batch}[${i}]: ${r.k} failed, then acknowledged by the return`);
        }
      }
    }
    // Only a handler that returned may have its unsettled rest acknowledged (outcome `returned`);
    // a throw, a cut-off, a crash or a doubtful settlement retries it (`threw`, `abandoned`).
    if (head.closed) {
      if (head.outcome === 'returned' && l.end?.how !== 'returned')
        v.wrongOutcome.push(
          `${l.batch}: handler ${l.end?.how ?? 'never returned'}, Host outcome ${head.outcome}`,
        );
    }
  }

  // --- Per message: counted deliveries (manifests), what the handler saw, the Host's decisions.
  const counted = new Map<string, { batch: string; index: number; attempts: number }[]>();
  for (const [batch, entries] of e.view.manifests) {
    const head = e.view.heads.get(batch);
    if (head && head.consumerUid !== e.mainConsumerUid) continue;
    entries.forEach((m: ManifestItem, index) => {
      const list = counted.get(m.id) ?? [];
      list.push({ batch, index, attempts: m.attempts });
      counted.set(m.id, list);
    });
  }
  const seenBy = new Map<string, Seen[]>();
  for (const l of logs.values()) {
    if (l.queue !== e.mainQueue) continue;
    const resolved = l.results.filter((r) => r.r === 'resolved');
    const allAck = resolved.find((r) => r.k === 'ackAll' || r.k === 'retryAll');
    for (const m of l.msgs) {
      const own = resolved.find((r) => r.i === m.i && (r.k === 'ack' || r.k === 'retry'));
      const believedAck = own ? own.k === 'ack' : allAck ? allAck.k === 'ackAll' : l.end?.how === 'returned';
      const list = seenBy.get(m.id) ?? [];
      list.push({ batch: l.batch, i: m.i, a: m.a, t: m.t, believedAck });
      seenBy.set(m.id, list);
      v.deliveries++;
    }
  }
  for (const id of seenBy.keys()) if (!acceptedIds.has(id)) v.unconfirmedDelivered++;

  const bodyOfId = new Map<string, string>();
  for (const a of e.accepted) bodyOfId.set(a.id, a.body);
  for (const l of logs.values()) for (const m of l.msgs) if (!bodyOfId.has(m.id)) bodyOfId.set(m.id, m.body);

  const max = 1 + e.maxRetries;
  const ackedIds = new Set<string>();
  const exhausted = new Set<string>();
  /** Acknowledged messages a later copy of which exhausted its own deliveries. */
  const exhaustedCopies = new Set<string>();
  // Counted ids too: a send whose answer was lost may still have been delivered (and exhausted).
  for (const id of new Set([...acceptedIds, ...seenBy.keys(), ...counted.keys()])) {
    const deliveries = (counted.get(id) ?? []).sort((a, b) => a.attempts - b.attempts);
    const saw = seenBy.get(id) ?? [];
    // Counted until the Host acknowledged the message: a copy delivered after that (SQS's
    // at-least-once, a producer's retried send) starts its own count and is a duplicate.
    const owed = owedDeliveries(deliveries, saw, e.view.heads);
    const attempts = owed.map((d) => d.attempts);
    if (attempts.some((a, n) => a !== n + 1))
      v.attemptAnomalies.push(
        `${id}: counted attempts ${attempts.join(',')} (expected 1..${attempts.length})`,
      );
    if (attempts.some((a) => a > max))
      v.attemptAnomalies.push(`${id}: ${Math.max(...attempts)} > ${max} deliveries`);
    for (const s of saw) {
      if (!deliveries.some((d) => d.batch === s.batch))
        v.attemptAnomalies.push(`${id}: delivered in ${s.batch}, which the Host did not count`);
    }
    let ackedAt: number | undefined;
    for (const d of deliveries) {
      const head = e.view.heads.get(d.batch);
      const handled = saw.some((s) => s.batch === d.batch);
      if (head && handled && decisionOf(head, d.index) === 'a') {
        ackedAt ??= d.attempts;
      }
    }
    if (ackedAt !== undefined) ackedIds.add(id);
    const excess = excessOf(saw, deliveries, e.view.heads, max);
    if (excess) {
      v.excessDeliveries += excess.count;
      v.beyondRetries.push(`${id}: ${excess.what}`);
    }
    const lastDelivery = deliveries[deliveries.length - 1];
    const lastHead = lastDelivery ? e.view.heads.get(lastDelivery.batch) : undefined;
    const lastDecision = lastHead && lastDelivery ? decisionOf(lastHead, lastDelivery.index) : undefined;
    if (lastDelivery?.attempts === max && lastDecision !== undefined && lastDecision !== 'a') {
      // Counted from 1 again after the acknowledgement: another copy of the message (a
      // producer's retried send), exhausted on its own — a duplicate, not a conflict.
      const later = deliveries.filter((d) => !owed.includes(d));
      if (ackedAt !== undefined && later.some((d) => d.attempts === 1)) exhaustedCopies.add(id);
      else if (ackedAt !== undefined)
        v.conflicts.push(`${id}: acknowledged at attempt ${ackedAt}, later delivered until exhausted`);
      else {
        exhausted.add(id);
        if (!saw.some((x) => x.batch === lastDelivery.batch)) v.exhaustedUnseen++;
      }
    }
    // Duplicates: deliveries after one the handler believed acknowledged (allowed, counted).
    const sorted = [...saw].sort((a, b) => a.t - b.t);
    const firstAck = sorted.findIndex((s) => s.believedAck);
    if (firstAck >= 0) v.duplicates += sorted.length - firstAck - 1;
  }

  // --- Dead-lettered: matched by body against what the dead-letter queue's consumer received.
  const receipts = new Map<string, Set<string>>();
  for (const l of dlqLogs.values()) {
    for (const m of l.msgs) {
      const ids = receipts.get(m.body) ?? new Set<string>();
      ids.add(m.id);
      receipts.set(m.body, ids);
    }
  }
  const candidates = new Map<string, string[]>();
  /** Exhausted ids no send answered and no handler saw: their bodies are unknown. */
  let anonymous = 0;
  for (const id of exhausted) {
    const body = bodyOfId.get(id);
    if (body === undefined) anonymous++;
    else candidates.set(body, [...(candidates.get(body) ?? []), id]);
  }
  const deadLettered = new Set<string>();
  for (const [body, ids] of candidates) {
    const got = receipts.get(body)?.size ?? 0;
    if (e.deadLetter) {
      // Accepted ids first, so an unconfirmed copy cannot hide a lost accepted message.
      const ordered = [...ids.filter((i) => acceptedIds.has(i)), ...ids.filter((i) => !acceptedIds.has(i))];
      for (const id of ordered.slice(0, got)) deadLettered.add(id);
      if (got > ids.length) v.deadLetterCopies += got - ids.length;
    }
  }
  // A body no exhausted id explains may be the copy of an unconfirmed send: each such copy needs
  // an anonymous exhausted id of its own, and one unconfirmed attempt with that body.
  const unconfirmed = new Map<string, number>();
  for (const b of e.unconfirmedBodies ?? []) unconfirmed.set(b, (unconfirmed.get(b) ?? 0) + 1);
  const copies = new Map<string, number>();
  for (const id of exhaustedCopies) {
    const body = bodyOfId.get(id);
    if (body !== undefined) copies.set(body, (copies.get(body) ?? 0) + 1);
  }
  for (const [body, ids] of receipts) {
    if (candidates.has(body)) continue;
    const ofCopies = Math.min(ids.size, copies.get(body) ?? 0);
    v.deadLetterCopies += ofCopies;
    const rest = ids.size - ofCopies;
    const explained = Math.min(rest, anonymous, unconfirmed.get(body) ?? 0);
    anonymous -= explained;
    v.unconfirmedDeadLettered += explained;
    if (explained < rest)
      v.unexplainedDeadLetters.push(
        `${body}: ${rest - explained} in the dead-letter queue, none exhausted its deliveries`,
      );
  }

  for (const a of e.accepted) {
    if (seenBy.has(a.id)) v.delivered++;
    if (ackedIds.has(a.id)) v.acked++;
    else if (deadLettered.has(a.id)) v.deadLettered++;
    else if (!e.deadLetter && exhausted.has(a.id)) v.dropped++;
    else v.lost.push(`${a.id} (seq ${a.seq})`);
  }

  const updates = e.concurrencyUpdates ?? [];
  v.breaches.push(
    ...concurrencyBreaches(
      logs.values(),
      e.mainQueue,
      (t, batch) => concurrencyBoundOf(e.maxConcurrency, updates, t, e.view.heads.get(batch)?.generation),
      e.deaths,
      e.workerTimeoutMs,
    ),
  );
  if (e.deadLetterQueue && e.deadLetterConcurrency !== undefined) {
    v.breaches.push(
      ...concurrencyBreaches(
        dlqLogs.values(),
        e.deadLetterQueue,
        e.deadLetterConcurrency,
        e.deaths,
        e.workerTimeoutMs,
      ),
    );
  }
  return v;
}

/** What still blocks a verdict: accepted messages with no final fate yet. */
export function unsettledIds(e: DeliveryEvidence): string[] {
  return checkDelivery(e).lost;
}
