import type { BatchHead, Manifest } from '../delivery/delivery-store.ts';
import type { HandlerError } from '../delivery/settlement-protocol.ts';

/** One finished batch as `GET …/consumers/{uid}/state` shows it: how it ended, never a body. */
export interface RecentBatch {
  batchId: string;
  /** How the handler ended: `returned`, `threw`, `abandoned` (cut off, or its runner was lost). */
  outcome: string;
  /** `live` (its runner finalised it) or `recovery` (the Host did, after the runner was gone). */
  finalizedBy: 'live' | 'recovery';
  /** Epoch ms when the Host finalised it. */
  endedAt: number;
  /** From the first receive of its messages to the end (ms); null when the manifest has no times. */
  durationMs: number | null;
  messages: number;
  acknowledged: number;
  retried: number;
  /** Out of retries: moved to the dead-letter queue, or dropped without one. */
  exhausted: number;
  /** The lowest and highest delivery attempt among its messages. */
  attempts: { min: number; max: number } | null;
  /** The handler's error when it threw: name and message (its stack is in the worker's log). */
  error: HandlerError | null;
}

/** The batch's decisions as finalisation applies them, read from its head and manifest. */
export function summarizeBatch(
  head: BatchHead,
  manifest: Manifest,
  maxRetries: number,
  mode: 'live' | 'recovery',
  now: number,
  error?: HandlerError,
): RecentBatch {
  const implicit = head.outcome === 'returned' && !head.doubtful ? 'a' : 'r';
  let acknowledged = 0;
  let retried = 0;
  let exhausted = manifest.moves.length;
  for (const [i, m] of manifest.entries.entries()) {
    const code = head.settled[String(i)] ?? head.all ?? implicit;
    if (code === 'a') acknowledged++;
    else if (m.attempts >= 1 + maxRetries) exhausted++;
    else retried++;
  }
  const all = [...manifest.entries, ...manifest.moves];
  const received = all.flatMap((m) => (m.receivedAt === undefined ? [] : [m.receivedAt]));
  const attempts = manifest.entries.map((m) => m.attempts);
  return {
    batchId: head.batchId,
    outcome: head.outcome ?? 'abandoned',
    finalizedBy: mode,
    endedAt: now,
    durationMs: received.length > 0 ? Math.max(0, now - Math.min(...received)) : null,
    messages: all.length,
    acknowledged,
    retried,
    exhausted,
    attempts: attempts.length > 0 ? { min: Math.min(...attempts), max: Math.max(...attempts) } : null,
    error: error ?? null,
  };
}

/** Where finished batches are kept per consumer, newest first, bounded in number and time. */
export interface RecentBatchStore {
  record(consumerUid: string, batch: RecentBatch): Promise<void>;
  recent(consumerUid: string, limit: number): Promise<RecentBatch[]>;
}

/** How many finished batches consumer state shows. */
export const RECENT_BATCHES_SHOWN = 20;
