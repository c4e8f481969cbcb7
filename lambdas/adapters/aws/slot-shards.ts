/**
 * How a consumer's concurrency slots are spread over DynamoDB items: shards of at most
 * `perShard` slots (one by default; where the items live: `slot-groups.ts`), so that every write
 * of a slot costs the same whatever maxConcurrency is (1 WRU, 2 inside a transaction; the
 * longest batch ids keep 10 slots under 1 KB).
 *
 * Shard `s` may hold at most `shardCapacity(max, s)` slots: shards fill in order, the capacities
 * add up to `max`, and each shard's capacity only grows with `max`.
 *
 * After an update that lowers maxConcurrency, slots of the old generation may live where the new
 * bound has less room, or none (a shard beyond its last): a take that counted its own shard only
 * would let the new generation run beside them. So each shard admits, at one write, only the
 * takes of the generation that last *adopted* it, and a generation adopts a shard only after a
 * read of every shard showed none over its capacity under the new bound (`planTake`). Until then
 * its takes go to shard 0 alone, each on condition that it leaves room for every slot the read
 * saw in the others: old slots only end, so a stale count of them only errs on the safe side.
 *
 * A slot's shard is part of its batch id (`<id>.s<shard>`; none for shard 0), so every later
 * write of the slot finds its item without a read.
 */

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

/** One shard as a read of every shard saw it: its slots, and the generation that adopted it. */
export interface ShardSeen {
  size: number;
  /** Absent before any generation adopted the shard (new, or written by an older Host). */
  generation?: number;
}

/** Slots held beyond their shard's capacity under `max`: where a lowered bound has less room. */
export function overhang(seen: ReadonlyMap<number, ShardSeen>, max: number, perShard: number): number {
  let over = 0;
  for (const [shard, s] of seen) over += Math.max(0, s.size - shardCapacity(max, shard, perShard));
  return over;
}

/** A newer generation adopted one of the shards: this one's lanes take nothing. */
export const supersededIn = (seen: ReadonlyMap<number, ShardSeen>, generation: number) =>
  [...seen.values()].some((s) => s.generation !== undefined && s.generation > generation);

/**
 * How a take of `generation` under `max` goes on after a read of every shard (`seen`):
 * - `shards`: nothing lives beyond the bound, so each shard's own capacity keeps the sum within
 *   it; try these (with room, in `order`), adopting any this generation has not adopted yet;
 * - `gated`: slots live beyond the bound; take in shard 0 only, on condition that it holds fewer
 *   than `budget`: its own capacity, and never more than the bound less the slots seen elsewhere;
 * - `refuse`: the bound is reached, or a newer generation holds the map.
 */
export type TakePlan =
  | { kind: 'shards'; shards: number[] }
  | { kind: 'gated'; budget: number }
  | { kind: 'refuse' };

export function planTake(
  seen: ReadonlyMap<number, ShardSeen>,
  max: number,
  generation: number,
  perShard: number,
  order: readonly number[],
): TakePlan {
  if (supersededIn(seen, generation)) return { kind: 'refuse' };
  const sizeOf = (shard: number) => seen.get(shard)?.size ?? 0;
  if (overhang(seen, max, perShard) > 0) {
    let elsewhere = 0;
    for (const [shard, s] of seen) if (shard !== 0) elsewhere += s.size;
    const budget = Math.min(shardCapacity(max, 0, perShard), max - elsewhere);
    return budget > sizeOf(0) ? { kind: 'gated', budget } : { kind: 'refuse' };
  }
  const shards = order.filter((shard) => sizeOf(shard) < shardCapacity(max, shard, perShard));
  return shards.length > 0 ? { kind: 'shards', shards } : { kind: 'refuse' };
}
