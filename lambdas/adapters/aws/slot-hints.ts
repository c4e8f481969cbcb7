/**
 * What one process last saw of a consumer's slot shards: how many slots each held, when, and
 * which generation had adopted it. Hints only — every take is still decided by its conditional
 * write — that let a take's first write go where it is likely to be admitted (`DynamoSlotMap.take`).
 */
import { shardCapacity, shardCount } from './slot-shards.ts';

interface ShardHint {
  size: number;
  at: number;
  /** The generation that had adopted the shard then, if any. */
  gen?: number;
}

/** A size seen this recently counts; an older one is taken as room. */
const FRESH_MS = 2_000;

export class ShardHints {
  private readonly perShard: number;
  private readonly byConsumer = new Map<string, Map<number, ShardHint>>();

  constructor(perShard: number) {
    this.perShard = perShard;
  }

  /** Notes a shard item as an answer showed it whole (its slots map, its adopting generation). */
  note(consumerUid: string, shard: number, item: { slots: object; adoptedBy?: unknown }): void {
    if (this.byConsumer.size > 1_000) this.byConsumer.clear();
    const byShard = this.byConsumer.get(consumerUid) ?? new Map<number, ShardHint>();
    this.byConsumer.set(consumerUid, byShard);
    const gen = typeof item.adoptedBy === 'number' ? item.adoptedBy : undefined;
    byShard.set(shard, {
      size: Object.keys(item.slots).length,
      at: Date.now(),
      ...(gen !== undefined ? { gen } : {}),
    });
  }

  /** Free slots per shard as seen within the last 2 s; a shard not seen since counts as having room. */
  recentRoom(consumerUid: string, max: number): number[] {
    const byShard = this.byConsumer.get(consumerUid);
    const now = Date.now();
    return Array.from({ length: shardCount(max, this.perShard) }, (_, s) => {
      const cap = shardCapacity(max, s, this.perShard);
      const seen = byShard?.get(s);
      return seen && now - seen.at <= FRESH_MS ? cap - seen.size : cap;
    });
  }

  /** The shards last seen adopted by `generation`, at any age: adoption only moves to newer ones. */
  adoptedBy(consumerUid: string, generation: number): Set<number> {
    const out = new Set<number>();
    for (const [shard, hint] of this.byConsumer.get(consumerUid) ?? []) {
      if (hint.gen === generation) out.add(shard);
    }
    return out;
  }
}
