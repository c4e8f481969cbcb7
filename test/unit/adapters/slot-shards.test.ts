/**
 * DL-02 with a slot map in shards (`slot-shards.ts`): the capacities of the shards add up to
 * maxConcurrency and each only grows with it, so lanes of two consumer generations with different
 * maxConcurrency never hold more slots between them than the larger allows.
 */
import { describe, expect, it } from 'vitest';
import {
  inShard,
  planTake,
  type ShardSeen,
  shardCapacity,
  shardCount,
  shardOf,
  spreadShard,
  takeOrder,
} from '../../../lambdas/adapters/aws/slot-shards.ts';

describe('DL-02 slot shards', () => {
  it('DL-02 capacities add up to maxConcurrency for every value 1..250 and shard size 1..10', () => {
    for (let per = 1; per <= 10; per++) {
      for (let max = 1; max <= 250; max++) {
        const n = shardCount(max, per);
        let sum = 0;
        for (let s = 0; s < n; s++) {
          const cap = shardCapacity(max, s, per);
          expect(cap).toBeGreaterThan(0);
          expect(cap).toBeLessThanOrEqual(per);
          sum += cap;
        }
        expect(sum).toBe(max);
        expect(shardCapacity(max, n, per)).toBe(0);
      }
    }
  });

  it('DL-02 each shard only grows with maxConcurrency: two generations together never exceed the larger bound', () => {
    for (const per of [1, 3, 10]) {
      for (let a = 1; a <= 60; a++) {
        for (let b = a; b <= 60; b++) {
          let together = 0;
          for (let s = 0; s < shardCount(b, per); s++) {
            expect(shardCapacity(a, s, per)).toBeLessThanOrEqual(shardCapacity(b, s, per));
            together += Math.max(shardCapacity(a, s, per), shardCapacity(b, s, per));
          }
          expect(together).toBe(b);
        }
      }
    }
  });

  it('a slot’s shard is part of its batch id, and a derived id never reads as a tag', () => {
    const first = 'bAbCdEfGhIjKlMnOpQrStUvWx';
    expect(shardOf(first)).toBe(0);
    expect(inShard(first, 0)).toBe(first);
    expect(inShard(first, 7)).toBe(`${first}.s7`);
    expect(shardOf(inShard(first, 7))).toBe(7);
    expect(inShard(inShard(first, 7), 3)).toBe(`${first}.s3`);
    expect(inShard(inShard(first, 7), 0)).toBe(first);
    // The 12-character segment of a derived id (`nextBatchId`), even one that starts with `s`.
    expect(shardOf(`${first}.s12345678901`)).toBe(0);
    expect(shardOf(`${first}.s12345678901.s24`)).toBe(24);
  });

  it('a take tries every shard once, from a start the batch id picks (the same for a repeated take)', () => {
    const order = takeOrder('bXyZ', 5);
    expect([...order].sort()).toEqual([0, 1, 2, 3, 4]);
    expect(takeOrder('bXyZ', 5)).toEqual(order);
    expect(takeOrder('bXyZ.s3', 5)).toEqual(order);
    const starts = new Set(Array.from({ length: 200 }, (_, i) => takeOrder(`b${i}x${i * 7}`, 5)[0]));
    expect(starts.size).toBe(5);
  });

  it('lanes started together are dealt over the shards in proportion to their capacities: max ranks fill every shard exactly', () => {
    for (const per of [1, 3, 10]) {
      for (let max = 1; max <= 120; max++) {
        const dealt = new Map<number, number>();
        for (let rank = 0; rank < max; rank++) {
          const s = spreadShard(rank, max, per);
          dealt.set(s, (dealt.get(s) ?? 0) + 1);
        }
        for (let s = 0; s < shardCount(max, per); s++)
          expect(dealt.get(s) ?? 0).toBe(shardCapacity(max, s, per));
        // Ranks past the bound begin where rank − max began.
        expect(spreadShard(max + 3, max, per)).toBe(spreadShard(3 % max, max, per));
      }
    }
    // The first ranks go to different shards (50 over shards of 10: 0, 1, 2, 3, 4, 0, …).
    expect(Array.from({ length: 6 }, (_, r) => spreadShard(r, 50, 10))).toEqual([0, 1, 2, 3, 4, 0]);
    // A take begins at its rank's shard and goes round the rest.
    expect(takeOrder('bAny', 5, 3)).toEqual([3, 4, 0, 1, 2]);
  });
  it('DL-02 after a read of every shard: per-shard takes only with nothing beyond the bound, else shard 0 below the room the others leave', () => {
    const seen = (sizes: number[], generation?: number) =>
      new Map<number, ShardSeen>(
        sizes.map((size, shard) => [shard, { size, ...(generation !== undefined ? { generation } : {}) }]),
      );
    // Lowered 30 → 10 while 20 run in shards 1–2: shard 0 may hold nothing yet.
    expect(planTake(seen([0, 10, 10], 1), 10, 2, 10, [0])).toEqual({ kind: 'refuse' });
    // Lowered 30 → 15 with 7 in shard 1 (capacity 5 now): shard 0 below 15 − 7.
    expect(planTake(seen([3, 7, 0], 1), 15, 2, 10, [1, 0])).toEqual({ kind: 'gated', budget: 8 });
    // Nothing beyond the bound: the shards with room, in the take's order.
    expect(planTake(seen([10, 2]), 15, 2, 10, [1, 0])).toEqual({ kind: 'shards', shards: [1] });
    // A newer generation adopted a shard: this one takes nothing.
    expect(planTake(seen([0, 0], 3), 20, 2, 10, [0, 1])).toEqual({ kind: 'refuse' });
  });
});
