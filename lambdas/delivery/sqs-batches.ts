/**
 * How this Host splits work into SQS batch requests. Batch actions take at most 10 entries; a
 * SendMessageBatch also carries at most 256 KiB of bodies in total. SQS allows more on queues
 * configured for it, but this Host never raises a queue's MaximumMessageSize, so 262,144 bytes is
 * what every one of its queues accepts (one envelope of a 127,000-byte body is about 170 kB).
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
