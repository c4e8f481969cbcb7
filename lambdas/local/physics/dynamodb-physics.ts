/**
 * DynamoDB's throughput physics, as one model every request to the stand-in passes through
 * (dynamodb-physics-proxy.ts puts it in front of DynamoDB Local):
 *
 * - Transactions conflict. While a `TransactWriteItems` is in flight, its items (a
 *   `ConditionCheck`'s too) are part of it: another transaction naming one of them is cancelled
 *   (`TransactionCanceledException`, reason `TransactionConflict` at that item), and a
 *   `PutItem`/`UpdateItem`/`DeleteItem` on one of them is refused with
 *   `TransactionConflictException` ("Operation was rejected because there is an ongoing
 *   transaction for the item", DynamoDB API reference). A `TransactGetItems` is cancelled the same
 *   way when one of its items is being written, and holds its items against transactional writes
 *   while it runs. The newcomer loses; the transaction in flight goes on.
 * - Partitions have a budget: 1,000 write units or 3,000 read units a second (or a linear mix),
 *   each divided by the scale k, per partition of the table and of every global secondary index.
 *   A request to a partition with no budget left is refused with
 *   `ProvisionedThroughputExceededException`, reason `…KeyRangeThroughputExceeded`: DynamoDB's
 *   throttling guide says hot partitions throttle in both capacity modes, and its API reference
 *   names that reason for a partition key value past the partition's limit. A transaction with a
 *   throttled item is cancelled with reason `ThrottlingError` there instead, as DynamoDB reports
 *   cancellations.
 * - Billing: a write unit per KB of the larger of the item before and after, a read unit per
 *   4 KB (half for an eventually consistent read), twice either inside a transaction; an
 *   index write per KB of the item in each index the item is or was in.
 *
 * Not modelled: BatchWriteItem items conflicting with a transaction (they are billed and
 * throttled only), Scans and PartiQL (billed nothing), table-level and account-level quotas,
 * a failed transaction's own billing.
 */
import {
  assignedValue,
  ItemMemory,
  type ItemRef,
  indexPartition,
  indexPartitionsOf,
  itemBytes,
  itemRef,
  queryPartition,
  readUnits,
  type TableSchema,
  type WireItem,
  writeUnits,
} from './dynamodb-items.ts';
import type { Physics } from './physics-config.ts';
import { PartitionBudgets } from './token-bucket.ts';

type Body = Record<string, unknown>;
type Kind = 'txWrite' | 'txGet' | 'write';

/** A refusal, as DynamoDB's JSON protocol answers it (HTTP 400). */
export interface Refusal {
  type: string;
  body: Body;
}

interface WriteTouch {
  ref: ItemRef;
  schema: TableSchema;
  units: number;
  indexes: string[];
}

/** A request admitted: what it holds while in flight, and what its answer will be billed for. */
export interface Ticket {
  op: string;
  holds: { id: string; kind: Kind }[];
  /** Whether the answer must wait out the hold (a transaction). */
  transaction: boolean;
  startedAt: number;
  body: Body;
}

export interface PhysicsStats {
  cancelledTransactions: number;
  refusedWrites: number;
  throttled: number;
  /** Conflicts by the item that was in another transaction, e.g. `t:ATTACH#c / _`. */
  conflictsByItem: Record<string, number>;
  /** The partitions that consumed most, with their units and throttles. */
  partitions: {
    partition: string;
    writeUnits: number;
    readUnits: number;
    throttles: number;
    seconds: number;
  }[];
}

const PREFIX = 'com.amazonaws.dynamodb.v20120810#';
const MARK = ' (TAKOFORM_PHYSICS)';

export class DynamoPhysics {
  private readonly inFlight = new Map<string, Record<Kind, number>>();
  private readonly budgets: PartitionBudgets;
  private readonly memory = new ItemMemory();
  private readonly stats = { cancelledTransactions: 0, refusedWrites: 0, throttled: 0 };
  private readonly conflictsByItem = new Map<string, number>();

  readonly physics: Physics;
  private readonly now: () => number;

  constructor(physics: Physics, now: () => number = Date.now) {
    this.physics = physics;
    this.now = now;
    this.budgets = new PartitionBudgets(physics.writeUnitsPerSecond, physics.readUnitsPerSecond);
  }

  /** Admits a request (a ticket to `finish` once answered) or refuses it. */
  begin(op: string, body: Body, schemas: ReadonlyMap<string, TableSchema>): Ticket | Refusal {
    const now = this.now();
    const ticket: Ticket = { op, holds: [], transaction: false, startedAt: now, body };
    switch (op) {
      case 'TransactWriteItems':
        return this.transactWrite(ticket, schemas, now);
      case 'TransactGetItems':
        return this.transactGet(ticket, schemas, now);
      case 'PutItem':
      case 'UpdateItem':
      case 'DeleteItem':
        return this.singleWrite(ticket, schemas, now);
      case 'BatchWriteItem':
        return this.batchWrite(ticket, schemas, now);
      case 'GetItem':
      case 'BatchGetItem':
      case 'Query':
        return this.read(ticket, schemas, now);
      default:
        return ticket;
    }
  }

  /** Releases what the request held and bills what its answer read. */
  finish(ticket: Ticket, answer: Body | undefined, schemas: ReadonlyMap<string, TableSchema>): void {
    for (const h of ticket.holds) {
      const c = this.inFlight.get(h.id);
      if (!c) continue;
      c[h.kind]--;
      if (c.txWrite + c.txGet + c.write === 0) this.inFlight.delete(h.id);
    }
    if (answer) this.billAnswer(ticket, answer, schemas, this.now());
  }

  snapshot(top = 10): PhysicsStats {
    const now = this.now();
    const partitions = [...this.budgets.entries()]
      .map(([partition, p]) => ({
        partition,
        writeUnits: p.writeUnits,
        readUnits: p.readUnits,
        throttles: p.throttles,
        seconds: Math.max(0.001, (now - p.firstAt) / 1000),
      }))
      .sort((a, b) => b.writeUnits + b.readUnits / 3 - (a.writeUnits + a.readUnits / 3))
      .slice(0, top);
    return { ...this.stats, conflictsByItem: Object.fromEntries(this.conflictsByItem), partitions };
  }

  private busy(id: string, kinds: Kind[]): boolean {
    const c = this.inFlight.get(id);
    return c !== undefined && kinds.some((k) => c[k] > 0);
  }

  private hold(ticket: Ticket, id: string, kind: Kind): void {
    let c = this.inFlight.get(id);
    if (!c) {
      c = { txWrite: 0, txGet: 0, write: 0 };
      this.inFlight.set(id, c);
    }
    c[kind]++;
    ticket.holds.push({ id, kind });
  }

  private conflict(ref: ItemRef): void {
    this.conflictsByItem.set(ref.name, (this.conflictsByItem.get(ref.name) ?? 0) + 1);
  }

  /** A write of `item` (or of the item at `key`, `bytes` long by the request), billed `factor` times. */
  private writeTouch(
    schema: TableSchema,
    keyOrItem: WireItem,
    bytes: number,
    newIndexes: string[],
    factor: number,
  ): WriteTouch {
    const ref = itemRef(schema, keyOrItem, this.physics.partition);
    const known = this.memory.get(ref.id);
    const units = writeUnits(Math.max(bytes, known?.bytes ?? 0)) * factor;
    return { ref, schema, units, indexes: [...new Set([...newIndexes, ...(known?.indexes ?? [])])] };
  }

  /** The write one action of a request makes (Put, Update, Delete or ConditionCheck). */
  private actionTouch(kind: string, a: Body, schema: TableSchema, factor: number): WriteTouch {
    if (kind === 'Put') {
      const item = a.Item as WireItem;
      return this.writeTouch(schema, item, itemBytes(item), indexPartitionsOf(schema, item), factor);
    }
    const key = a.Key as WireItem;
    const values = a.ExpressionAttributeValues as WireItem | undefined;
    const bytes = itemBytes(key) + (kind === 'Update' ? itemBytes(values ?? {}) : 0);
    const indexes: string[] = [];
    if (kind === 'Update')
      for (const ix of schema.indexes) {
        const v = assignedValue(
          a.UpdateExpression as string | undefined,
          ix.pk,
          a.ExpressionAttributeNames as Record<string, string> | undefined,
          values,
        );
        if (v) indexes.push(indexPartition(schema, ix.name, v));
      }
    return this.writeTouch(schema, key, bytes, indexes, factor);
  }

  /** The partitions of `touches` with no budget left: the first one, its throttle counted. */
  private throttledWrite(touches: WriteTouch[], now: number): string | undefined {
    const parts = touches.flatMap((t) => [t.ref.partition, ...t.indexes]);
    const refusing = this.budgets.refusing(parts, now);
    if (refusing !== undefined) this.stats.throttled++;
    return refusing;
  }

  private chargeWrites(touches: WriteTouch[], now: number): void {
    for (const t of touches) {
      this.budgets.chargeWrite(t.ref.partition, t.units, now);
      for (const ix of t.indexes) this.budgets.chargeWrite(ix, t.units, now);
    }
  }

  private transactWrite(
    ticket: Ticket,
    schemas: ReadonlyMap<string, TableSchema>,
    now: number,
  ): Ticket | Refusal {
    const actions = (ticket.body.TransactItems as Body[] | undefined) ?? [];
    const touches: (WriteTouch | undefined)[] = actions.map((action) => {
      const [kind, a] = Object.entries(action)[0] as [string, Body];
      const schema = schemas.get(a.TableName as string);
      return schema ? this.actionTouch(kind, a, schema, 2) : undefined;
    });
    const conflicted = touches.map((t) => t !== undefined && this.busy(t.ref.id, ['txWrite', 'txGet']));
    if (conflicted.some(Boolean)) {
      this.stats.cancelledTransactions++;
      for (const [i, t] of touches.entries()) if (t && conflicted[i]) this.conflict(t.ref);
      return cancelled(conflicted.map((c) => (c ? 'TransactionConflict' : 'None')));
    }
    const known = touches.filter((t): t is WriteTouch => t !== undefined);
    const refusing = this.throttledWrite(known, now);
    if (refusing !== undefined) {
      return cancelled(
        touches.map((t) =>
          t && (t.ref.partition === refusing || t.indexes.includes(refusing)) ? 'ThrottlingError' : 'None',
        ),
      );
    }
    this.chargeWrites(known, now);
    for (const t of known) this.hold(ticket, t.ref.id, 'txWrite');
    ticket.transaction = true;
    return ticket;
  }

  private transactGet(
    ticket: Ticket,
    schemas: ReadonlyMap<string, TableSchema>,
    now: number,
  ): Ticket | Refusal {
    const gets = ((ticket.body.TransactItems as Body[] | undefined) ?? []).map((x) => x.Get as Body);
    const refs = gets.map((g) => {
      const schema = schemas.get(g.TableName as string);
      return schema ? itemRef(schema, g.Key as WireItem, this.physics.partition) : undefined;
    });
    const conflicted = refs.map((r) => r !== undefined && this.busy(r.id, ['txWrite', 'write']));
    if (conflicted.some(Boolean)) {
      this.stats.cancelledTransactions++;
      for (const [i, r] of refs.entries()) if (r && conflicted[i]) this.conflict(r);
      return cancelled(conflicted.map((c) => (c ? 'TransactionConflict' : 'None')));
    }
    const known = refs.filter((r): r is ItemRef => r !== undefined);
    const refusing = this.budgets.refusing(
      known.map((r) => r.partition),
      now,
    );
    if (refusing !== undefined) {
      this.stats.throttled++;
      return cancelled(refs.map((r) => (r?.partition === refusing ? 'ThrottlingError' : 'None')));
    }
    for (const r of known) this.hold(ticket, r.id, 'txGet');
    ticket.transaction = true;
    return ticket;
  }

  private singleWrite(
    ticket: Ticket,
    schemas: ReadonlyMap<string, TableSchema>,
    now: number,
  ): Ticket | Refusal {
    const schema = schemas.get(ticket.body.TableName as string);
    if (!schema) return ticket;
    const kind = ticket.op === 'PutItem' ? 'Put' : ticket.op === 'UpdateItem' ? 'Update' : 'Delete';
    const touch = this.actionTouch(kind, ticket.body, schema, 1);
    if (this.busy(touch.ref.id, ['txWrite'])) {
      this.stats.refusedWrites++;
      this.conflict(touch.ref);
      return refusal('TransactionConflictException', {
        message: `Operation was rejected because there is an ongoing transaction for the item.${MARK}`,
      });
    }
    const refusing = this.throttledWrite([touch], now);
    if (refusing !== undefined) return throttle(schema, refusing, 'Write');
    this.chargeWrites([touch], now);
    this.hold(ticket, touch.ref.id, 'write');
    if (kind === 'Put') this.memory.set(touch.ref.id, itemBytes(ticket.body.Item as WireItem), touch.indexes);
    if (kind === 'Delete') this.memory.forget(touch.ref.id);
    return ticket;
  }

  private batchWrite(
    ticket: Ticket,
    schemas: ReadonlyMap<string, TableSchema>,
    now: number,
  ): Ticket | Refusal {
    const touches: WriteTouch[] = [];
    for (const [table, requests] of Object.entries(
      (ticket.body.RequestItems as Record<string, Body[]>) ?? {},
    )) {
      const schema = schemas.get(table);
      if (!schema) continue;
      for (const r of requests) {
        if (r.PutRequest) touches.push(this.actionTouch('Put', r.PutRequest as Body, schema, 1));
        if (r.DeleteRequest) touches.push(this.actionTouch('Delete', r.DeleteRequest as Body, schema, 1));
      }
    }
    const refusing = this.throttledWrite(touches, now);
    const schema = touches[0]?.schema;
    if (refusing !== undefined && schema) return throttle(schema, refusing, 'Write');
    this.chargeWrites(touches, now);
    return ticket;
  }

  /** Reads are admitted while their partition has budget, and billed by what they returned. */
  private read(ticket: Ticket, schemas: ReadonlyMap<string, TableSchema>, now: number): Ticket | Refusal {
    const parts: [TableSchema, string][] = [];
    const b = ticket.body;
    if (ticket.op === 'BatchGetItem') {
      for (const [table, r] of Object.entries((b.RequestItems as Record<string, Body>) ?? {})) {
        const schema = schemas.get(table);
        if (schema)
          for (const key of (r.Keys as WireItem[]) ?? [])
            parts.push([schema, itemRef(schema, key, this.physics.partition).partition]);
      }
    } else {
      const schema = schemas.get(b.TableName as string);
      const part =
        schema &&
        (ticket.op === 'Query'
          ? queryPartition(schema, b, this.physics.partition)
          : itemRef(schema, b.Key as WireItem, this.physics.partition).partition);
      if (schema && part) parts.push([schema, part]);
    }
    const refusing = this.budgets.refusing(
      parts.map(([, p]) => p),
      now,
    );
    const schema = parts.find(([, p]) => p === refusing)?.[0];
    if (refusing !== undefined && schema) {
      this.stats.throttled++;
      return throttle(schema, refusing, 'Read');
    }
    return ticket;
  }

  private billAnswer(
    ticket: Ticket,
    answer: Body,
    schemas: ReadonlyMap<string, TableSchema>,
    now: number,
  ): void {
    const b = ticket.body;
    const by = this.physics.partition;
    const learn = (schema: TableSchema, item: WireItem, factor: number, consistent: boolean) => {
      const ref = itemRef(schema, item, by);
      const bytes = itemBytes(item);
      this.memory.set(ref.id, bytes, indexPartitionsOf(schema, item));
      this.budgets.chargeRead(ref.partition, readUnits(bytes, consistent) * factor, now);
    };
    if (ticket.op === 'GetItem') {
      const schema = schemas.get(b.TableName as string);
      if (schema && answer.Item) learn(schema, answer.Item as WireItem, 1, b.ConsistentRead === true);
    } else if (ticket.op === 'BatchGetItem') {
      const asked = (b.RequestItems as Record<string, Body>) ?? {};
      for (const [table, items] of Object.entries((answer.Responses as Record<string, WireItem[]>) ?? {})) {
        const schema = schemas.get(table);
        if (schema) for (const item of items) learn(schema, item, 1, asked[table]?.ConsistentRead === true);
      }
    } else if (ticket.op === 'TransactGetItems') {
      const gets = (b.TransactItems as Body[]) ?? [];
      ((answer.Responses as Body[]) ?? []).forEach((r, i) => {
        const schema = schemas.get((gets[i]?.Get as Body | undefined)?.TableName as string);
        if (schema && r?.Item) learn(schema, r.Item as WireItem, 2, true);
      });
    } else if (ticket.op === 'Query') {
      this.billQuery(ticket, answer, schemas, now);
    } else if (ticket.op === 'UpdateItem' && b.ReturnValues === 'ALL_NEW' && answer.Attributes) {
      const schema = schemas.get(b.TableName as string);
      const item = answer.Attributes as WireItem;
      if (schema)
        this.memory.set(itemRef(schema, item, by).id, itemBytes(item), indexPartitionsOf(schema, item));
    }
  }

  /** A Query pays for the items it returned together, rounded up once. */
  private billQuery(
    ticket: Ticket,
    answer: Body,
    schemas: ReadonlyMap<string, TableSchema>,
    now: number,
  ): void {
    const schema = schemas.get(ticket.body.TableName as string);
    const part = schema && queryPartition(schema, ticket.body, this.physics.partition);
    if (!schema || !part) return;
    const items = (answer.Items as WireItem[]) ?? [];
    const bytes = items.reduce((n, item) => n + itemBytes(item), 0);
    this.budgets.chargeRead(part, readUnits(bytes, ticket.body.ConsistentRead === true), now);
  }
}

export const isRefusal = (x: Ticket | Refusal): x is Refusal => 'type' in x;

function refusal(type: string, body: Body): Refusal {
  return { type, body: { __type: `${PREFIX}${type}`, ...body } };
}

function cancelled(codes: string[]): Refusal {
  const reasons = codes.map((Code) =>
    Code === 'TransactionConflict'
      ? { Code, Message: 'Transaction is ongoing for the item' }
      : Code === 'ThrottlingError'
        ? { Code, Message: 'Throughput exceeds the current capacity for one or more resources.' }
        : { Code },
  );
  return refusal('TransactionCanceledException', {
    message: `Transaction cancelled, please refer cancellation reasons for specific reasons [${codes.join(', ')}]${MARK}`,
    CancellationReasons: reasons,
  });
}

function throttle(schema: TableSchema, partition: string, what: 'Read' | 'Write'): Refusal {
  const index = partition.startsWith(`${schema.table}/`)
    ? partition.slice(schema.table.length + 1).split(':')[0]
    : undefined;
  const resource = `arn:aws:dynamodb:local:000000000000:table/${schema.table}${index ? `/index/${index}` : ''}`;
  return refusal('ProvisionedThroughputExceededException', {
    message: `Throughput exceeds the partition's limit for ${partition}.${MARK}`,
    ThrottlingReasons: [
      { reason: `${index ? 'Index' : 'Table'}${what}KeyRangeThroughputExceeded`, resource },
    ],
  });
}
