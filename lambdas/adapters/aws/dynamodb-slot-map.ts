/**
 * A consumer's concurrency slots (DL-02) in DynamoDB: shard items `_` (shard 0) and `shard#<s>`,
 * `perShard` slots each (`slot-shards.ts`), kept in groups of partition keys (`slot-groups.ts`).
 * Each slot is one entry `slots.<batchId> = deadline` (plus `registered.<batchId>` once it
 * holds a batch) in its shard, and every write names one shard item, so its cost does not grow
 * with maxConcurrency. Shard 0 records how many shards the consumer has used (`shards`), raised
 * before a slot is first taken in a new one, so that a reader who knows shard 0 knows them all.
 * Each shard records the consumer generation that adopted it (`adoptedBy`): a take at one write
 * is admitted only there, and a generation adopts a shard only when no slot lives beyond its
 * bound (`planTake` in `slot-shards.ts`), so maxConcurrency bounds every generation's slots
 * together.
 *
 * The earlier layout (ten slots a shard, all under one key) named the adopting generation `gen`.
 * An adoption sets that to a value no generation reaches, so a process still running the earlier
 * code (during a deploy) sees a newer generation everywhere and takes nothing, while its lanes
 * keep the slots they hold; those slots count here as living beyond their shard's capacity, so
 * takes go on below the bound until they end.
 */
import {
  type AttributeValue,
  type DynamoDBClient,
  GetItemCommand,
  ScanCommand,
} from '@aws-sdk/client-dynamodb';
import { marshall, unmarshall } from '@aws-sdk/util-dynamodb';
import type { DispatchState, IdleRelease, SlotAnswer, SlotBound } from '../../delivery/delivery-store.ts';
import { log } from '../../shared/log.ts';
import { TABLE_KEYS } from '../../shared/table-schema.ts';
import { countWake, readWakes } from './consumer-wakes.ts';
import { conditionalUpdate } from './dynamodb-conditional-update.ts';
import {
  consumerOfSlotKey,
  DEFAULT_SLOT_LAYOUT,
  groupCount,
  queryGroups,
  SLOT_PREFIX,
  type SlotLayout,
  shardOfSortKey,
  slotShardKey,
  upTo,
} from './slot-groups.ts';
import { ShardHints } from './slot-hints.ts';
import {
  inShard,
  overhang,
  planTake,
  type ShardSeen,
  shardCapacity,
  shardCount,
  shardOf,
  spreadShard,
  supersededIn,
  takeOrder,
} from './slot-shards.ts';

const { pk: PK, sk: SK } = TABLE_KEYS;

/** The attribute naming the generation that adopted a shard. */
const ADOPTED_BY = { '#gen': 'adoptedBy' };
/** The earlier layout's name for it, and what an adoption sets there (see above). */
const EARLIER = { '#earlier': 'gen' };
const SEALED = Number.MAX_SAFE_INTEGER;

/** One shard item as a state; `partial` unless it is the consumer's only shard. */
function stateOf(item: Record<string, unknown> | undefined, shard: number): DispatchState {
  const only = shard === 0 && Number(item?.shards ?? 1) <= 1;
  return {
    slots: (item?.slots ?? {}) as Record<string, number>,
    registered: (item?.registered ?? {}) as Record<string, boolean>,
    ...(typeof item?.recoveredAt === 'number' ? { recoveredAt: item.recoveredAt } : {}),
    ...(only ? {} : { partial: true as const }),
  };
}

/** Shard states merged into one; partial unless `complete`. */
function mergeStates(states: DispatchState[], complete: boolean): DispatchState {
  const out: DispatchState = { slots: {}, registered: {} };
  for (const s of states) {
    Object.assign(out.slots, s.slots);
    Object.assign(out.registered, s.registered);
    if (s.recoveredAt !== undefined) out.recoveredAt = Math.max(out.recoveredAt ?? 0, s.recoveredAt);
  }
  if (!complete) out.partial = true;
  return out;
}

/**
 * How a take writes its shard: `fenced`, admitted only in a shard its generation adopted (one
 * write, the common case); `adopt`, adopting the shard with the take, after a read of every
 * shard found nothing beyond the bound; `gated`, in shard 0 without adopting it, below a budget
 * that leaves room for the slots seen in the other shards.
 */
type TakeMode = { kind: 'fenced' } | { kind: 'adopt' } | { kind: 'gated'; budget: number };

/** What a refused take saw of its shard's generation: its own, a newer one, or another. */
type Fence = 'ours' | 'newer' | 'other';

const generationOf = (item: Record<string, unknown> | undefined) =>
  typeof item?.adoptedBy === 'number' ? item.adoptedBy : undefined;

/** Every shard's state merged: a whole view (the wake count is not part of it: `consumer-wakes.ts`). */
function whole(states: DispatchState[]): DispatchState {
  return mergeStates(states, true);
}

export class DynamoSlotMap {
  private readonly client: DynamoDBClient;
  private readonly table: string;
  private readonly layout: SlotLayout;
  private readonly perShard: number;
  /** Shards each consumer is known to have used (never fewer than it has): which items to read. */
  private readonly knownShards = new Map<string, number>();
  /** What this process last saw of each shard: where a take's first write is likely admitted. */
  private readonly hints: ShardHints;
  /** Raises of shard 0's count under way, so concurrent takes in this process make one. */
  private readonly raising = new Map<string, Promise<void>>();
  /** Shards `prepare` saw adopted, per consumer generation (`<consumer>#<generation>`). */
  private readonly prepared = new Map<string, Set<number>>();

  constructor(client: DynamoDBClient, table: string, layout: SlotLayout = DEFAULT_SLOT_LAYOUT) {
    this.client = client;
    this.table = table;
    this.layout = layout;
    this.perShard = layout.perShard;
    this.hints = new ShardHints(layout.perShard);
  }

  /** The key of a consumer's shard item. */
  keyOf(consumerUid: string, shard: number): Record<string, string> {
    return slotShardKey(consumerUid, shard, this.layout);
  }

  private update(
    consumerUid: string,
    shard: number,
    input: Parameters<typeof conditionalUpdate>[3],
    opts?: { busy?: boolean },
  ) {
    return conditionalUpdate(this.client, this.table, this.keyOf(consumerUid, shard), input, opts);
  }

  /** Creates the shard's maps if missing; a new shard is counted in shard 0 first. */
  async init(consumerUid: string, shard = 0): Promise<void> {
    if (shard > 0) await this.countShards(consumerUid, shard + 1);
    await this.create(consumerUid, shard);
  }

  /**
   * Before `lanes` lanes start together: makes the shards their takes begin in (`spreadShard`)
   * exist and adopted by their generation, counted first, where this process has not seen them
   * so. Without it a cohort filling a new map meets them missing or unadopted, and every lane
   * pays a refused take, a read and a write of its own. Nothing is adopted while slots live
   * beyond the bound (after an update that lowered it): the lanes then take as `take` says.
   */
  async prepare(consumerUid: string, bound: SlotBound, lanes: number): Promise<void> {
    const { max, generation } = bound;
    const key = `${consumerUid}#${generation}`;
    const done = this.prepared.get(key) ?? new Set<number>();
    const begin = new Set(
      Array.from({ length: Math.min(lanes, max) }, (_, rank) => spreadShard(rank, max, this.perShard)),
    );
    const missing = [...begin].filter((shard) => !done.has(shard));
    if (missing.length === 0) return;
    const { seen } = await this.readShards(consumerUid, max);
    if (supersededIn(seen, generation) || overhang(seen, max, this.perShard) > 0) return;
    const count = Math.max(...missing) + 1;
    if (count > (this.knownShards.get(consumerUid) ?? 1)) await this.countShards(consumerUid, count);
    const unadopted = missing.filter((shard) => seen.get(shard)?.generation !== generation);
    await Promise.all(unadopted.map((shard) => this.create(consumerUid, shard, generation)));
    if (this.prepared.size > 1_000) this.prepared.clear();
    this.prepared.set(key, new Set([...done, ...missing]));
  }

  /** Creates a shard's maps if missing; with `generation`, adopts it too (unless a newer one did). */
  private async create(consumerUid: string, shard: number, generation?: number): Promise<void> {
    const init = 'SET slots = if_not_exists(slots, :empty), registered = if_not_exists(registered, :empty)';
    const out = await this.update(consumerUid, shard, {
      UpdateExpression: generation === undefined ? init : `${init}, #gen = :g, #earlier = :sealed`,
      ...(generation === undefined
        ? { ExpressionAttributeValues: marshall({ ':empty': {} }) }
        : {
            ConditionExpression: 'attribute_not_exists(#gen) OR #gen <= :g',
            ExpressionAttributeNames: { ...ADOPTED_BY, ...EARLIER },
            ExpressionAttributeValues: marshall({ ':empty': {}, ':g': generation, ':sealed': SEALED }),
          }),
      ReturnValues: 'ALL_NEW',
    });
    if (out.ok) this.noteSize(consumerUid, shard, out.item);
  }

  /** Raises shard 0's count of used shards to at least `count`. */
  private async countShards(consumerUid: string, count: number): Promise<void> {
    const key = `${consumerUid}#${count}`;
    let raise = this.raising.get(key);
    if (!raise) {
      raise = this.update(consumerUid, 0, {
        UpdateExpression: 'SET shards = :n',
        ConditionExpression: 'attribute_not_exists(shards) OR shards < :n',
        ExpressionAttributeValues: marshall({ ':n': count }),
      })
        .then(() => this.learnShards(consumerUid, count))
        .finally(() => this.raising.delete(key));
      this.raising.set(key, raise);
    }
    await raise;
  }

  /** Notes how many slots a shard holds, from an answer that showed it whole. */
  private noteSize(consumerUid: string, shard: number, item: Record<string, unknown> | undefined): void {
    if (shard === 0 && typeof item?.shards === 'number') this.learnShards(consumerUid, item.shards);
    if (item?.slots === undefined) return;
    this.hints.note(consumerUid, shard, item as { slots: object; adoptedBy?: unknown });
  }

  private learnShards(consumerUid: string, count: number): void {
    if (count > (this.knownShards.get(consumerUid) ?? 1)) this.knownShards.set(consumerUid, count);
  }

  /**
   * Every shard of the consumer, read consistently: a whole view. With `maxConcurrency`, every
   * group its bound may use is read at once (a registration's read of all slots, `registrationReads`).
   */
  async read(consumerUid: string, maxConcurrency?: number): Promise<DispatchState> {
    return whole((await this.readShards(consumerUid, maxConcurrency)).states);
  }

  /**
   * The groups one Query after another (the first holds shard 0, whose count names the others),
   * stopping once the shards read satisfy `enough`: then `partial`. Each group is read after the
   * call began, so what it shows of a slot is as fresh as a whole read's.
   */
  async readUntil(consumerUid: string, enough: (seen: DispatchState) => boolean): Promise<DispatchState> {
    const items = await queryGroups(this.client, this.table, consumerUid, [0]);
    const used = Number(items.find((item) => item[SK] === '_')?.shards ?? 1);
    const groups = groupCount(Math.max(used, this.knownShards.get(consumerUid) ?? 1), this.layout);
    const states = items.map((item) => stateOf(item, shardOfSortKey(item[SK])));
    for (let group = 1; group < groups; group++) {
      const seen = mergeStates(states, false);
      if (enough(seen)) return seen;
      for (const item of await queryGroups(this.client, this.table, consumerUid, [group])) {
        states.push(stateOf(item, shardOfSortKey(item[SK])));
      }
    }
    return whole(states);
  }

  /**
   * Every shard's state, and its size and adopting generation (`planTake`): the groups that the
   * bound and this process's knowledge name, one Query each at once, then any further groups that
   * shard 0's count names. A slot that existed when the read began is seen: its shard was counted
   * in shard 0 before it was taken, and shard 0 is read after the read began.
   */
  private async readShards(
    consumerUid: string,
    maxConcurrency?: number,
  ): Promise<{ states: DispatchState[]; seen: Map<number, ShardSeen> }> {
    const known = Math.max(
      this.knownShards.get(consumerUid) ?? 1,
      maxConcurrency === undefined ? 1 : shardCount(maxConcurrency, this.perShard),
    );
    const asked = groupCount(known, this.layout);
    const items = await queryGroups(this.client, this.table, consumerUid, upTo(asked));
    const used = Number(items.find((item) => item[SK] === '_')?.shards ?? 1);
    const needed = groupCount(used, this.layout);
    if (needed > asked) {
      const rest = upTo(needed).slice(asked);
      items.push(...(await queryGroups(this.client, this.table, consumerUid, rest)));
    }
    const states: DispatchState[] = [];
    const seen = new Map<number, ShardSeen>();
    for (const item of items) {
      const shard = shardOfSortKey(item[SK]);
      this.noteSize(consumerUid, shard, item);
      const state = stateOf(item, shard);
      states.push(state);
      const generation = generationOf(item);
      seen.set(shard, {
        size: Object.keys(state.slots).length,
        ...(generation !== undefined ? { generation } : {}),
      });
    }
    return { states, seen };
  }

  private async getShard(consumerUid: string, shard: number): Promise<Record<string, unknown> | undefined> {
    const Key = marshall(this.keyOf(consumerUid, shard));
    const out = await this.client.send(
      new GetItemCommand({ TableName: this.table, Key, ConsistentRead: true }),
    );
    return out.Item ? unmarshall(out.Item) : undefined;
  }

  /**
   * Takes a slot in a shard with room. The first try goes, in the batch id's order (so lanes
   * starting together spread out), to a shard that had room when this process last saw it
   * (within 2 s; one not seen since counts as having room), admitted only if the take's
   * generation adopted that shard. Once a try is refused, every shard is read once and the take
   * goes on as `planTake` says: in the shards with room (adopting them), or, while slots live
   * beyond the bound, in shard 0 below the room the others leave. A lane start costs one request
   * when it finds room at once, and near the bound (or its generation's first take in a shard)
   * the try, the read and the take, not one refused write per full shard. Lanes started
   * together (`spread`) begin where their rank deals them, so a cohort that fills an empty map
   * does not crowd into the shards a hash happened to pick.
   */
  async take(
    consumerUid: string,
    batchId: string,
    deadline: number,
    bound: SlotBound,
    spread?: { rank: number },
  ): Promise<SlotAnswer> {
    const { max } = bound;
    const count = shardCount(max, this.perShard);
    const order = takeOrder(
      batchId,
      count,
      spread ? spreadShard(spread.rank, max, this.perShard) : undefined,
    );
    const tryIn = async (shard: number, mode: TakeMode, guess = false) => {
      if (shard > 0 && (this.knownShards.get(consumerUid) ?? 1) <= shard) {
        await this.countShards(consumerUid, shard + 1);
      }
      const id = inShard(batchId, shard);
      const out = await this.takeIn(consumerUid, shard, id, deadline, bound, mode, guess);
      return { ...out, batchId: id };
    };
    const refused = (state: DispatchState) => ({ taken: false, state, batchId: inShard(batchId, 0) });
    const recent = this.hints.recentRoom(consumerUid, max);
    const room = (s: number) => (recent[s] ?? 0) > 0;
    // A lane on its own tries first a shard its generation adopted, as far as this process saw:
    // a first guess at one it did not costs a refused write and a read of every shard — most of a
    // lone lane's take on a consumer that few lanes have used since it was created or updated.
    const adopted = spread ? undefined : this.hints.adoptedBy(consumerUid, bound.generation);
    const first =
      count === 1 ? 0 : (order.find((s) => room(s) && adopted?.has(s) === true) ?? order.find(room));
    if (first !== undefined) {
      // A guess: met busy, the take reads every shard instead of waiting for this one.
      const out = await tryIn(first, { kind: 'fenced' }, count > 1);
      if (out.taken) return out;
      if (out.fence === 'newer') return refused(out.state);
      // The only shard under the bound, adopted and full: no other shard could have room.
      if (count === 1 && out.fence === 'ours') return out;
    }
    const { states, seen } = await this.readShards(consumerUid, max);
    const all = whole(states);
    // Taken in another shard by this call's earlier try, whose answer was lost.
    const earlier = Object.keys(all.slots).find((id) => inShard(id, 0) === inShard(batchId, 0));
    if (earlier !== undefined) return { taken: true, state: all, batchId: earlier };
    const plan = planTake(seen, max, bound.generation, this.perShard, order);
    if (plan.kind === 'gated') {
      const out = await tryIn(0, plan);
      if (out.taken) return out;
    }
    if (plan.kind === 'shards') {
      for (const shard of plan.shards) {
        const adopted = seen.get(shard)?.generation === bound.generation;
        const out = await tryIn(shard, { kind: adopted ? 'fenced' : 'adopt' });
        if (out.taken) return out;
      }
    }
    return refused(all);
  }

  /**
   * A take in one shard (`TakeMode`): its answer after the take, or as it was when refused, with
   * the shard's generation as the refusal saw it.
   */
  private async takeIn(
    consumerUid: string,
    shard: number,
    batchId: string,
    deadline: number,
    bound: SlotBound,
    mode: TakeMode,
    guess = false,
  ): Promise<{ taken: boolean; state: DispatchState; fence?: Fence }> {
    const capacity = mode.kind === 'gated' ? mode.budget : shardCapacity(bound.max, shard, this.perShard);
    const sets = [
      'slots.#b = :deadline',
      ...(mode.kind === 'adopt' ? ['#gen = :g', '#earlier = :sealed'] : []),
    ];
    for (let round = 0; round < 2; round++) {
      const out = await this.update(
        consumerUid,
        shard,
        {
          UpdateExpression: `SET ${sets.join(', ')}`,
          // `<`, not `<>`: a lowered maxConcurrency must not let the count run past it. size() of a
          // missing map is false on AWS already; saying so first keeps moto from failing the call.
          ConditionExpression: `attribute_exists(slots) AND size(slots) < :max AND attribute_not_exists(slots.#b) AND ${
            mode.kind === 'fenced' ? '#gen = :g' : '(attribute_not_exists(#gen) OR #gen <= :g)'
          }`,
          ExpressionAttributeNames: {
            '#b': batchId,
            ...ADOPTED_BY,
            ...(mode.kind === 'adopt' ? EARLIER : {}),
          },
          ExpressionAttributeValues: marshall({
            ':deadline': deadline,
            ':max': capacity,
            ':g': bound.generation,
            ...(mode.kind === 'adopt' ? { ':sealed': SEALED } : {}),
          }),
          ReturnValues: 'ALL_NEW',
          ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        },
        // A guessed shard in another's transaction is its lane registering: held, so full.
        { busy: guess },
      );
      if (out.ok) {
        this.noteSize(consumerUid, shard, out.item);
        return { taken: true, state: stateOf(out.item, shard) };
      }
      if (out.busy) return { taken: false, state: stateOf(undefined, shard) };
      if (out.old?.slots !== undefined) {
        this.noteSize(consumerUid, shard, out.old);
        const state = stateOf(out.old, shard);
        const gen = generationOf(out.old);
        const fence: Fence =
          gen === bound.generation ? 'ours' : gen !== undefined && gen > bound.generation ? 'newer' : 'other';
        // Taken by this call's earlier try, whose answer was lost (a lane's ids are derived, so
        // no one else asks for this one): it is ours. Otherwise the shard is full or not adopted.
        return { taken: state.slots[batchId] !== undefined, state, fence };
      }
      await this.init(consumerUid, shard); // first use: the shard does not exist yet
    }
    return { taken: false, state: stateOf(undefined, shard), fence: 'other' };
  }

  async swap(
    consumerUid: string,
    previous: string,
    batchId: string,
    deadline: number,
    bound: SlotBound,
  ): Promise<SlotAnswer> {
    // The next batch stays in its lane's shard, where the count does not change.
    const shard = shardOf(previous);
    const id = inShard(batchId, shard);
    const out = await this.update(consumerUid, shard, {
      UpdateExpression: 'SET slots.#b = :deadline REMOVE slots.#p, registered.#p',
      // With the previous slot held the count stays as it is, so it may equal the bound; without
      // it (recovered meanwhile) this is a take like any other, admitted only where its generation
      // adopted the shard (`take`). A missing shard (deleted meanwhile) fails the condition on AWS
      // already (size() of it is false); saying so first keeps moto from failing the call.
      ConditionExpression:
        'attribute_exists(slots) AND attribute_not_exists(slots.#b) AND ((attribute_exists(slots.#p) AND size(slots) <= :max) OR (attribute_not_exists(slots.#p) AND size(slots) < :max AND #gen = :g))',
      ExpressionAttributeNames: { '#b': id, '#p': previous, ...ADOPTED_BY },
      ExpressionAttributeValues: marshall({
        ':deadline': deadline,
        ':max': shardCapacity(bound.max, shard, this.perShard),
        ':g': bound.generation,
      }),
      ReturnValues: 'ALL_NEW',
      ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
    });
    this.noteSize(consumerUid, shard, out.ok ? out.item : out.old);
    if (out.ok) return { taken: true, state: stateOf(out.item, shard), batchId: id };
    const old = stateOf(out.old, shard);
    // This hand-over was made before (a repeated call whose answer was lost): the slot is ours.
    if (old.slots[id] !== undefined && old.slots[previous] === undefined) {
      return { taken: true, state: old, batchId: id };
    }
    // The shard is full (a lowered maxConcurrency): the previous slot is freed all the same.
    await this.release(consumerUid, previous);
    return { taken: false, state: old, batchId: id };
  }

  /** Frees a slot; a recovery's release is stamped (`recoveredAt`), which registrations look for. */
  async release(
    consumerUid: string,
    batchId: string,
    recoveredAt?: number,
  ): Promise<Record<string, unknown> | undefined> {
    const out = await this.update(consumerUid, shardOf(batchId), {
      UpdateExpression: `REMOVE slots.#b, registered.#b${recoveredAt === undefined ? '' : ' SET recoveredAt = :at'}`,
      ConditionExpression: 'attribute_exists(slots)',
      ExpressionAttributeNames: { '#b': batchId },
      ...(recoveredAt === undefined ? {} : { ExpressionAttributeValues: marshall({ ':at': recoveredAt }) }),
      ReturnValues: 'ALL_NEW',
    });
    if (out.ok) this.noteSize(consumerUid, shardOf(batchId), out.item);
    return out.ok ? out.item : undefined;
  }

  /**
   * Frees a slot that received nothing; with the consumer's wake count and time read after it.
   * A slot registered meanwhile holds another runner's batch (a duplicate InvokeWorker): it stays.
   */
  async releaseIdle(consumerUid: string, batchId: string): Promise<IdleRelease> {
    const shard = shardOf(batchId);
    const out = await this.update(consumerUid, shard, {
      UpdateExpression: 'REMOVE slots.#b',
      ConditionExpression: 'attribute_exists(slots) AND attribute_not_exists(registered.#b)',
      ExpressionAttributeNames: { '#b': batchId },
      ReturnValues: 'ALL_NEW',
      ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
    });
    if (!out.ok && stateOf(out.old, shard).registered[batchId]) return { registered: true };
    if (out.ok) this.noteSize(consumerUid, shard, out.item);
    // Read after the release (see `consumer-wakes.ts`): a send that did not see this slot gone
    // counted its wake before, and this read sees it. The slot is free either way: a failed read
    // ends the lane, and a send it raced is the supervisor's.
    return readWakes(this.client, this.table, consumerUid).catch((err: unknown) => {
      log.warn('could not read the wake count after an idle release', { consumerUid, err });
      return {};
    });
  }

  /**
   * Counts a wake, then reads shard 0 (with the count): partial for a consumer with several
   * shards. Neither write nor read meets a registration's transaction.
   */
  async wake(consumerUid: string, now: number): Promise<DispatchState> {
    const counted = await countWake(this.client, this.table, consumerUid, now);
    return { ...stateOf(await this.getShard(consumerUid, 0), 0), ...counted };
  }

  async releaseUnregistered(consumerUid: string, batchId: string): Promise<boolean> {
    const out = await this.update(consumerUid, shardOf(batchId), {
      UpdateExpression: 'REMOVE slots.#b',
      ConditionExpression: 'attribute_exists(slots.#b) AND attribute_not_exists(registered.#b)',
      ExpressionAttributeNames: { '#b': batchId },
    });
    return out.ok;
  }

  async markRegistered(consumerUid: string, batchId: string): Promise<boolean> {
    const shard = shardOf(batchId);
    for (let round = 0; round < 2; round++) {
      try {
        const out = await this.update(consumerUid, shard, {
          UpdateExpression: 'SET registered.#b = :true',
          ConditionExpression: 'attribute_exists(slots.#b)',
          ExpressionAttributeNames: { '#b': batchId },
          ExpressionAttributeValues: marshall({ ':true': true }),
        });
        return out.ok;
      } catch (err) {
        if ((err as Error).name !== 'ValidationException') throw err;
        await this.init(consumerUid, shard); // an older slot map without the `registered` map
      }
    }
    return false;
  }

  async consumersWithSlots(): Promise<string[]> {
    const out = new Set<string>();
    let start: Record<string, AttributeValue> | undefined;
    do {
      const page = await this.client.send(
        new ScanCommand({
          TableName: this.table,
          FilterExpression: 'begins_with(#pk, :p)',
          ProjectionExpression: '#pk',
          ExpressionAttributeNames: { '#pk': PK },
          ExpressionAttributeValues: marshall({ ':p': SLOT_PREFIX }),
          ConsistentRead: true,
          ExclusiveStartKey: start,
        }),
      );
      for (const item of page.Items ?? []) out.add(consumerOfSlotKey(String(unmarshall(item)[PK])));
      start = page.LastEvaluatedKey;
    } while (start);
    return [...out];
  }

  /** Frees every slot that holds no batch; answers the ids freed. */
  async revokeUnregistered(consumerUid: string): Promise<string[]> {
    const state = await this.read(consumerUid);
    const revoked: string[] = [];
    for (const batchId of Object.keys(state.slots)) {
      if (state.registered[batchId]) continue;
      // Fails if the slot was registered meanwhile: it holds a batch now and stays.
      if (await this.releaseUnregistered(consumerUid, batchId)) revoked.push(batchId);
    }
    return revoked;
  }
}
