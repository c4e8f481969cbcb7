import type { BatchDigest, Manifest } from './delivery-store.ts';

/**
 * What registration records in a batch's head for operators' summary of it: with the settlements
 * the close fixes, it tells what finalisation decides for each message without reading the
 * manifest (see `summarizeHead` in lambdas/operator/recent-batches.ts).
 */
export function digestOf(manifest: Manifest, maxRetries: number): BatchDigest {
  const all = [...manifest.entries, ...manifest.moves];
  const received = all.flatMap((m) => (m.receivedAt === undefined ? [] : [m.receivedAt]));
  const attempts = manifest.entries.map((m) => m.attempts);
  return {
    messages: all.length,
    moves: manifest.moves.length,
    lastTry: manifest.entries.flatMap((m, i) => (m.attempts >= 1 + maxRetries ? [i] : [])),
    attempts: attempts.length > 0 ? { min: Math.min(...attempts), max: Math.max(...attempts) } : null,
    firstReceivedAt: received.length > 0 ? Math.min(...received) : null,
  };
}
