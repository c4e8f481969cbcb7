/**
 * How this Host splits work into SQS batch requests. Batch actions take at most 10 entries; a
 * SendMessageBatch also carries at most 256 KiB of bodies in total. The Host keeps to that size
 * though SQS accepts up to 1 MiB a batch: each of its queues' MaximumMessageSize is set to its
 * largest envelope (a 127,000-byte body is about 170 kB), and 256 KiB holds one whole.
 */
export const SQS_BATCH_ENTRIES = 10;
export const SQS_BATCH_BYTES = 262_144;

/** Splits into groups of at most 10 entries. */
export function byCount<T>(items: readonly T[], size = SQS_BATCH_ENTRIES): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

/** Splits into SendMessageBatch requests: at most 10 entries and 256 KiB of bodies each. */
export function bySendLimits<T>(items: readonly T[], bodyOf: (item: T) => string): T[][] {
  const chunks: T[][] = [];
  let current: T[] = [];
  let bytes = 0;
  for (const item of items) {
    const size = Buffer.byteLength(bodyOf(item));
    if (current.length > 0 && (current.length === SQS_BATCH_ENTRIES || bytes + size > SQS_BATCH_BYTES)) {
      chunks.push(current);
      current = [];
      bytes = 0;
    }
    current.push(item);
    bytes += size;
  }
  if (current.length > 0) chunks.push(current);
  return chunks;
}
