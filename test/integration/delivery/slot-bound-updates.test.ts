/**
 * DL-02 across an update of maxConcurrency, in the DynamoDB store at the default shard size: once
 * the new generation's bound is set, none of its takes succeeds while the slots of the old
 * generation (whose batches run until their handlers end) and its own number the new bound or
 * more, whatever the two bounds are; and once the old ones have ended, the new generation
 * reaches its bound exactly. Slots stand for running batches here: a take is where a batch
 * starts, and the old generation's batches only end after the update (its registrations are
 * refused from then on), apart from stale takes of its lanes, which never run a handler.
 */
import { randomUUID } from 'node:crypto';
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import fc from 'fast-check';
import { beforeAll, describe, expect, inject, it } from 'vitest';
import { dynamoDbClient } from '../../../lambdas/adapters/aws/clients.ts';
import { createHostTable } from '../../../lambdas/adapters/aws/create-host-table.ts';
import { DynamoDeliveryStore } from '../../../lambdas/adapters/aws/dynamodb-delivery-store.ts';
import { shardOf } from '../../../lambdas/adapters/aws/slot-shards.ts';

const deadline = () => Date.now() + 600_000;

/** A small deterministic generator, so a failing case replays from its seed. */
function rng(seed: number) {
  let x = seed >>> 0 || 1;
  return (n: number) => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) % n;
  };
}

/**
 * One consumer updated from `oldMax` (generation 1) to `newMax` (generation 2) while `running`
 * batches of the old generation hold their slots. Every step checks the bound: once the new
 * generation holds any slot, it and the old generation's batches together stay within `newMax`.
 */
class Update {
  readonly old: string[] = [];
  readonly fresh: string[] = [];
  /** Old-generation takes after the update (a lane with a context read before it): no handler. */
  readonly stale: string[] = [];
  /** The most batches that ran at once since the new generation's first take. */
  peak = 0;
  private readonly pick: (n: number) => number;
  private readonly store: DynamoDeliveryStore;
  readonly consumer: string;
  readonly oldMax: number;
  readonly newMax: number;

  constructor(store: DynamoDeliveryStore, consumer: string, oldMax: number, newMax: number, seed = 1) {
    this.store = store;
    this.consumer = consumer;
    this.oldMax = oldMax;
    this.newMax = newMax;
    this.pick = rng(seed);
  }

  private take(generation: number, k: number) {
    const bound = generation === 1 ? { max: this.oldMax, generation } : { max: this.newMax, generation };
    return Promise.all(
      Array.from({ length: k }, () =>
        this.store.takeSlot(this.consumer, `b${randomUUID()}`, deadline(), bound),
      ),
    );
  }

  /** `running` batches of the old generation, before the update. */
  async start(running: number): Promise<void> {
    for (let i = 0; i < running; i += 25) {
      for (const out of await this.take(1, Math.min(25, running - i))) {
        expect(out.taken).toBe(true);
        this.old.push(out.batchId);
      }
    }
  }

  /** `k` takes of the new generation at once. */
  async takeNew(k: number): Promise<number> {
    const outs = await this.take(2, k);
    for (const out of outs) if (out.taken) this.fresh.push(out.batchId);
    this.check();
    return outs.filter((o) => o.taken).length;
  }

  async takeStale(): Promise<void> {
    const [out] = await this.take(1, 1);
    if (out?.taken) this.stale.push(out.batchId);
    this.check();
  }

  private async end(from: string[], which?: (id: string) => boolean): Promise<void> {
    const candidates = from.filter((id) => which?.(id) ?? true);
    if (candidates.length === 0) return;
    const id = candidates[this.pick(candidates.length)] as string;
    from.splice(from.indexOf(id), 1);
    await this.store.releaseSlot(this.consumer, id);
    this.check();
  }

  endOld = (which?: (id: string) => boolean) => this.end(this.old, which);
  endNew = () => this.end(this.fresh);
  endStale = () => this.end(this.stale);

  check(): void {
    if (this.fresh.length === 0) return;
    const running = this.fresh.length + this.old.length;
    this.peak = Math.max(this.peak, running);
    expect(running, `${this.oldMax} → ${this.newMax}: batches running`).toBeLessThanOrEqual(this.newMax);
  }

  /** Every old batch ends (and every stale slot goes); the new generation then fills its bound. */
  async finish(): Promise<void> {
    while (this.old.length > 0 || this.stale.length > 0) {
      await Promise.all([this.endOld(), this.endStale(), this.takeNew(1)]);
    }
    while ((await this.takeNew(Math.min(25, this.newMax - this.fresh.length + 1))) > 0);
    expect(this.fresh.length).toBe(this.newMax);
    expect(Object.keys(await this.store.slots(this.consumer))).toHaveLength(this.newMax);
  }
}

describe('DL-02 maxConcurrency bounds batches of every generation after an update', () => {
  let client: DynamoDBClient;
  let table: string;
  /** The default layout (one slot per item), or `slotsPerShard` to an item (10: the earlier one). */
  const store = (slotsPerShard?: number) =>
    new DynamoDeliveryStore(client, table, slotsPerShard ? { slotsPerShard } : {});
  const update = (oldMax: number, newMax: number, seed?: number, slotsPerShard?: number) =>
    new Update(store(slotsPerShard), `c-${randomUUID()}`, oldMax, newMax, seed);

  beforeAll(async () => {
    client = dynamoDbClient(inject('ddbEndpoint'));
    table = `t-${randomUUID()}`;
    await createHostTable(client, table);
  });

  it('DL-02 lowered 30 → 10 while 20 batches run in shards 1–2 (ten slots to an item): the new generation takes nothing until fewer than 10 run, then never more than 10 run', async () => {
    const u = update(30, 10, 1, 10);
    await u.start(30);
    // The old generation's batches in shard 0 end first: 20 run on in shards 1 and 2.
    while (u.old.some((id) => shardOf(id) === 0)) await u.endOld((id) => shardOf(id) === 0);
    expect(await u.takeNew(15)).toBe(0);
    while (u.old.length > 10) {
      await u.endOld();
      expect(await u.takeNew(3)).toBe(0);
    }
    // Once nine old batches run, one new batch may start, and no more until another old one ends.
    await u.endOld();
    expect(await u.takeNew(5)).toBe(1);
    await u.endOld();
    expect(await u.takeNew(5)).toBe(1);
    await u.finish();
    expect(u.peak).toBe(10);
  });

  it('DL-02 lowered 250 → 11 with 250 running: at most 11 run from the new generation’s first take on', async () => {
    const u = update(250, 11, 7);
    await u.start(250);
    expect(await u.takeNew(20)).toBe(0);
    while (u.old.length > 0) {
      await Promise.all([u.endOld(), u.endOld(), u.endOld(), u.takeNew(2)]);
      if (u.fresh.length > 5) await u.endNew();
    }
    await u.finish();
  });

  it('DL-02 raised 1 → 40 with its one batch running: 39 start beside it, the fortieth once it ended', async () => {
    const u = update(1, 40);
    await u.start(1);
    expect(await u.takeNew(45)).toBe(39);
    await u.takeStale();
    expect(u.stale).toEqual([]);
    await u.finish();
  });

  it('DL-02 lowered 40 → 1 with 40 running: the new generation’s one batch starts only after the last old one ended', async () => {
    const u = update(40, 1);
    await u.start(40);
    while (u.old.length > 0) {
      expect(await u.takeNew(2)).toBe(0);
      await u.endOld();
    }
    await u.finish();
  });

  it('DL-02 for any bounds 1..250 before and after, any batches running, stale old takes and any order of ends and takes, the new generation never runs beside the new bound or more', async () => {
    const step = fc.oneof(
      fc.constant({ kind: 'endOld' as const }),
      fc.constant({ kind: 'endNew' as const }),
      fc.constant({ kind: 'stale' as const }),
      fc.record({ kind: fc.constant('takeNew' as const), k: fc.integer({ min: 1, max: 6 }) }),
      fc.record({ kind: fc.constant('race' as const), k: fc.integer({ min: 1, max: 4 }) }),
    );
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 250 }),
        fc.integer({ min: 1, max: 250 }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        fc.array(step, { minLength: 1, maxLength: 30 }),
        fc.integer({ min: 1, max: 2 ** 31 - 1 }),
        async (oldMax, newMax, share, steps, seed) => {
          const u = update(oldMax, newMax, seed);
          await u.start(Math.round(share * oldMax));
          for (const s of steps) {
            if (s.kind === 'endOld') await u.endOld();
            else if (s.kind === 'endNew') await u.endNew();
            else if (s.kind === 'stale') await u.takeStale();
            else if (s.kind === 'takeNew') await u.takeNew(s.k);
            // Old batches end while new takes run.
            else await Promise.all([u.endOld(), u.endOld(), u.takeNew(s.k)]);
          }
          await u.finish();
        },
      ),
      { numRuns: 30 },
    );
    // 30 runs of up to 250 slots each against DynamoDB Local: about 45 s alone, and past the
    // suite's 120 s when two other files share the machine's two cores.
  }, 300_000);
});
