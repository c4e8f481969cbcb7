/**
 * How a consumer's concurrency slots are spread over DynamoDB items: shards of at most
 * `perShard` slots, so that every write of a slot costs the same whatever maxConcurrency is
 * (1 WRU, 2 inside a transaction; the longest batch ids keep 10 slots under 1 KB).
 *
 * Shard `s` may hold at most `shardCapacity(max, s)` slots: shards fill in order, the capacities
 * add up to `max`, and each shard's capacity only grows with `max`. So while lanes of two
 * consumer generations with different maxConcurrency run side by side (an update), the slots
 * held never exceed the larger of the two, as with a single map (DL-02).
 *
 * A slot's shard is part of its batch id (`<id>.s<shard>`; none for shard 0), so every later
 * write of the slot finds its item without a read.
 */

/** Slots per shard item by default. */
export const SLOTS_PER_SHARD = 10;

export const shardCount = (max: number, perShard: number) => Math.max(1, Math.ceil(max / perShard));

export const shardCapacity = (max: number, shard: number, perShard: number) =>
  Math.min(perShard, Math.max(0, max - shard * perShard));

/** Three characters at most: never the 12-character segment of a derived id (`nextBatchId`). */
const TAG = /\.s(\d{1,3})$/;

export const shardOf = (batchId: string) => Number(TAG.exec(batchId)?.[1] ?? 0);

/** The batch id as held in `shard`: its tag replaced (or dropped, for shard 0). */
export const inShard = (batchId: string, shard: number) => {
  const base = batchId.replace(TAG, '');
  return shard === 0 ? base : `${base}.s${shard}`;
};

/**
 * The order in which a take tries the shards: from one picked by the batch id (so lanes spread
 * over the shards, and a repeated take tries them in the same order), or by the take's rank among
 * lanes started together (`spreadShard`), round the rest.
 */
export function takeOrder(batchId: string, count: number, first?: number): number[] {
  let h = 0;
  for (const ch of batchId.replace(TAG, '')) h = (h * 31 + ch.charCodeAt(0)) >>> 0;
  const start = first ?? h % count;
  return Array.from({ length: count }, (_, i) => (start + i) % count);
}

/**
 * The shard where the lane of `rank` among lanes started together begins: ranks are dealt over
 * the shards in proportion to their capacities, so lanes that fill an empty map each find room
 * at their first try (rank r and rank r + max begin in the same shard).
 */
export function spreadShard(rank: number, max: number, perShard: number): number {
  const count = shardCount(max, perShard);
  const r = ((rank % max) + max) % max;
  // Deal row by row: row k holds the shards with more than k slots.
  let seen = 0;
  for (let k = 0; k < perShard; k++) {
    for (let s = 0; s < count; s++) {
      if (shardCapacity(max, s, perShard) <= k) continue;
      if (seen++ === r) return s;
    }
  }
  return 0;
}
