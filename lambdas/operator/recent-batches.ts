import type { BatchHead } from '../delivery/delivery-store.ts';
import type { HandlerError } from '../delivery/settlement-protocol.ts';

/** One finished batch as `GET …/consumers/{uid}/state` shows it: how it ended, never a body. */
export interface RecentBatch {
  batchId: string;
  /** How the handler ended: `returned`, `threw`, `abandoned` (cut off, or its runner was lost). */
  outcome: string;
  /** `live` (its runner closed and finalised it) or `recovery` (the Host did, the runner being gone). */
  finalizedBy: 'live' | 'recovery';
  /** Epoch ms when the batch was closed: its decisions fixed (finalisation applies them). */
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

/**
 * A closed batch's line, from its head alone: the settlements the close fixed, read against what
 * registration knew (the digest), counted as finalisation decides — each delivered message
 * acknowledged, retried, or out of retries. Undefined for a head that is not closed or has no
 * digest (registered by an older Host).
 */
export function summarizeHead(head: BatchHead): RecentBatch | undefined {
  const d = head.digest;
  if (!d || !head.closed || head.closedAt === undefined) return undefined;
  const implicit = head.outcome === 'returned' && !head.doubtful ? 'a' : 'r';
  const lastTry = new Set(d.lastTry);
  let acknowledged = 0;
  let outOfRetries = 0;
  for (let i = 0; i < head.size; i++) {
    const code = head.settled[String(i)] ?? head.all ?? implicit;
    if (code === 'a') acknowledged++;
    else if (lastTry.has(i)) outOfRetries++;
  }
  return {
    batchId: head.batchId,
    outcome: head.outcome ?? 'abandoned',
    finalizedBy: head.closedBy === 'runner' && !head.recovering ? 'live' : 'recovery',
    endedAt: head.closedAt,
    durationMs: d.firstReceivedAt === null ? null : Math.max(0, head.closedAt - d.firstReceivedAt),
    messages: d.messages,
    acknowledged,
    retried: head.size - acknowledged - outOfRetries,
    exhausted: d.moves + outOfRetries,
    attempts: d.attempts,
    error: head.error ?? null,
  };
}

/** How long a closed batch stays listed in consumer state. */
export const RECENT_BATCHES_KEPT_MS = 24 * 3600 * 1000;

/** How many finished batches consumer state shows. */
export const RECENT_BATCHES_SHOWN = 20;
