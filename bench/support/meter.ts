/**
 * Counts what the Host spends, as AWS would bill it: every SDK call by service, operation and
 * the part of the Host that made it; DynamoDB request units reported by the server
 * (`ReturnConsumedCapacity: 'TOTAL'` is added to every command that supports it); Lambda
 * invocations with their measured durations; Step Functions state transitions.
 *
 * Attribution uses an AsyncLocalStorage context: the bench wraps each entry point (a Task state,
 * a batch-host call, a producer send) in `attribute(name, fn)`, and the SDK middleware reads the
 * innermost name when a call is made.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import type { AttributeValue, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { SQSClient } from '@aws-sdk/client-sqs';
import type { HostFunctionMemoryRole } from '../../lambdas/shared/host-function-memory.ts';
import { itemSize, transactionalUnits, updateGrowth } from './item-size.ts';
import { EXPRESS_SPAN, OpenSpans } from './open-spans.ts';

/** A context, and the meter a Lambda role's log lines count into (`log-meter.ts`). */
export interface Attribution {
  name: string;
  meter?: Meter;
}

const contexts = new AsyncLocalStorage<Attribution>();

/**
 * Runs `fn` with every SDK call inside it attributed to `name`. With `meter`, `name` is a Lambda
 * role and the Host's log lines inside count as that function's; a nested context without one
 * (setup, a producer) is no function's.
 */
export function attribute<T>(name: string, fn: () => T, meter?: Meter): T {
  return contexts.run(meter ? { name, meter } : { name }, fn);
}

export const currentContext = (): string => contexts.getStore()?.name ?? 'unattributed';
export const currentAttribution = (): Attribution | undefined => contexts.getStore();

/**
 * The Host function a Lambda role of the tally runs in: the part before `:` (`batch-host:register`
 * is the batch host). Throws for any other, so that a role added to the bench is given its
 * function (and so its memory and log lines) before it is priced.
 */
export function hostFunctionOf(role: string): HostFunctionMemoryRole {
  const fn = ROLE_FUNCTIONS.get(role.split(':')[0] ?? role);
  if (!fn) throw new Error(`the bench knows no Host function for the Lambda role ${JSON.stringify(role)}`);
  return fn;
}

const ROLE_FUNCTIONS = new Map<string, HostFunctionMemoryRole>([
  ['step', 'step'],
  ['worker', 'worker'],
  ['batch-host', 'batchHost'],
  ['supervisor', 'supervisor'],
]);

/**
 * What Lambda itself writes to the function's log group per invocation: its START, END and REPORT
 * lines, about 250–300 bytes together (REPORT carries the X-Ray trace id when tracing is on, as
 * the Host deploys it). Counted per invocation, as ingested bytes, beside the Host's own lines.
 */
export const LAMBDA_PLATFORM_LOG_BYTES = 300;

/** DynamoDB operations that accept `ReturnConsumedCapacity`. */
const CAPACITY_READS = new Set(['GetItem', 'Query', 'Scan', 'BatchGetItem', 'TransactGetItems']);
const CAPACITY_WRITES = new Set([
  'PutItem',
  'UpdateItem',
  'DeleteItem',
  'BatchWriteItem',
  'TransactWriteItems',
]);

export interface SdkTally {
  calls: number;
  errors: number;
  /** Read request units DynamoDB reported. */
  rru: number;
  /** Write request units DynamoDB reported. */
  wru: number;
  /** Writes refused by a condition (or a cancelled transaction): AWS bills them, DynamoDB Local reports nothing. */
  refusedWrites: number;
  /** DynamoDB: items the calls named, by kind (`itemKind`), e.g. `{ ATTACH: 2, 'BATCH/head': 1 }`. */
  items?: Record<string, number>;
  /**
   * DynamoDB: write units of the calls that named one item, by its kind — what one kind's writes
   * cost where one operation writes several kinds (a PutItem of a head or of a manifest).
   */
  wruByItem?: Record<string, number>;
}

export interface LambdaTally {
  invocations: number;
  /** Sum of measured durations, ms. */
  totalMs: number;
  /** Sum of durations rounded up to whole ms per invocation (Lambda bills 1 ms steps). */
  billedMs: number;
}

/** Everything counted between two resets, keyed for the JSON output. */
export interface Tally {
  /** context → `service:Operation` → counts */
  sdk: Record<string, Record<string, SdkTally>>;
  /** Lambda function role (e.g. `step:AcquireSlot`, `worker:InvokeWorker`, `batch-host:register`) → counts */
  lambda: Record<string, LambdaTally>;
  /**
   * context → bytes the Host's functions would write to CloudWatch Logs there: Lambda's lines per
   * invocation and the Host's lines at the deployed level (`log-meter.ts`). Absent in results
   * from before logs were counted.
   */
  logs?: Record<string, number>;
  /** State name → entries (retries are counted as extra entries, as AWS bills them). */
  transitions: Record<string, number>;
  executions: number;
  /**
   * Of those, the Express lanes' (`lane-kinds.ts`): executions, their transitions (not billed
   * there) and their durations as Express bills them (each rounded up to 100 ms). Absent in
   * results from before Express lanes.
   */
  express?: { executions: number; transitions: number; billedMs: number };
}

const emptyTally = (): Tally => ({
  sdk: {},
  lambda: {},
  logs: {},
  transitions: {},
  executions: 0,
  express: { executions: 0, transitions: 0, billedMs: 0 },
});

function sdkEntry(t: Tally, context: string, key: string): SdkTally {
  t.sdk[context] ??= {};
  const byOp = t.sdk[context];
  byOp[key] ??= { calls: 0, errors: 0, rru: 0, wru: 0, refusedWrites: 0 };
  return byOp[key];
}

interface CapacityRecord {
  CapacityUnits?: number;
  ReadCapacityUnits?: number;
  WriteCapacityUnits?: number;
}

/** The total of what a call's `ConsumedCapacity` reports. */
function reportedUnits(reported: unknown): number {
  const records = (Array.isArray(reported) ? reported : reported ? [reported] : []) as CapacityRecord[];
  return records.reduce((n, c) => n + (c.WriteCapacityUnits ?? c.CapacityUnits ?? 0), 0);
}

type Attr = { S?: string } | undefined;
type Keyed = Record<string, Attr> | undefined;

/**
 * What kind of item a key names: the table's `pk` up to its first `#`, and the `sk` the same way
 * when it is not `_` — `ATTACH`, `RES`, `BATCH/head`. A sort key that is not a word (a time or
 * an id, one per item) is `*`: `RECENT/*`, so one kind is not split into an entry per item. It
 * reads the request, never the Host's key builders, so it stays right when the Host's items change.
 */
export function itemKind(key: Keyed): string {
  const pk = key?.pk?.S;
  if (!pk) return '?';
  const sk = key?.sk?.S;
  const head = pk.split('#')[0] ?? pk;
  if (!sk || sk === '_') return head;
  return foldKind(`${head}/${sk.split('#')[0] ?? sk}`);
}

const WORD = /^[A-Za-z][A-Za-z_-]*$/;

/** `RECENT/001796…` → `RECENT/*`: also for counts stored by a bench run before kinds were folded. */
export function foldKind(kind: string): string {
  const slash = kind.indexOf('/');
  if (slash < 0 || kind.startsWith('query:')) return kind;
  const sub = kind.slice(slash + 1);
  return sub === '*' || WORD.test(sub) ? kind : `${kind.slice(0, slash)}/*`;
}

/** Item counts by kind with per-item kinds folded (`foldKind`). */
export function foldKinds(items: Record<string, number> | undefined): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [kind, n] of Object.entries(items ?? {})) out[foldKind(kind)] = (out[foldKind(kind)] ?? 0) + n;
  return out;
}

/** The kinds of every item a DynamoDB request names (one entry per item; a Query counts its partition). */
function itemKinds(input: unknown): string[] {
  const i = (input ?? {}) as {
    Key?: Keyed;
    Item?: Keyed;
    TransactItems?: Record<string, { Key?: Keyed; Item?: Keyed }>[];
    RequestItems?: Record<
      string,
      { Keys?: Keyed[] } | { PutRequest?: { Item?: Keyed }; DeleteRequest?: { Key?: Keyed } }[]
    >;
    ExpressionAttributeValues?: Record<string, Attr>;
    KeyConditionExpression?: string;
  };
  if (i.Key || i.Item) return [itemKind(i.Key ?? i.Item)];
  if (i.TransactItems)
    return i.TransactItems.flatMap((t) => Object.values(t).map((op) => itemKind(op?.Key ?? op?.Item)));
  if (i.RequestItems) {
    return Object.values(i.RequestItems).flatMap((r) =>
      Array.isArray(r)
        ? r.map((w) => itemKind(w.PutRequest?.Item ?? w.DeleteRequest?.Key))
        : (r.Keys ?? []).map(itemKind),
    );
  }
  if (i.KeyConditionExpression && i.ExpressionAttributeValues) {
    // The partition value a Query names: the first value whose text looks like a key.
    const pk = Object.values(i.ExpressionAttributeValues).find((v) => v?.S?.includes('#'));
    return [`query:${itemKind({ pk })}`];
  }
  return [];
}

type Item = Record<string, AttributeValue>;
type TransactAction = {
  Put?: { Item?: Item };
  Update?: {
    Key?: Item;
    UpdateExpression?: string;
    ExpressionAttributeNames?: Record<string, string>;
    ExpressionAttributeValues?: Record<string, AttributeValue>;
  };
  Delete?: { Key?: Item };
  ConditionCheck?: { Key?: Item };
};

/** An item's identity in the Host table (`pk`, `sk`). */
const itemId = (key: Item | undefined) => `${key?.pk?.S ?? ''}\u0000${key?.sk?.S ?? ''}`;

/**
 * The sizes of items as last seen in a request or a response, so that a transaction can be priced
 * item by item. AWS bills a transaction 2 WRU per started KB of every item it writes or checks
 * (a `ConditionCheck` as a write of the item it checks); DynamoDB Local, measured here, reports
 * one figure per transaction that falls short of that — 2 WRU for three items under 1 KB, where
 * AWS bills 6. Without this, the bench would price every registration below AWS.
 */
export class ItemSizes {
  private readonly sizes = new Map<string, number>();

  /** What the request writes, before it is sent (a Put's item is known exactly). */
  private learnRequest(operation: string, input: Record<string, unknown>): void {
    if (operation === 'PutItem') this.set(input.Item as Item);
    if (operation === 'DeleteItem') this.sizes.delete(itemId(input.Key as Item));
    if (operation === 'BatchWriteItem') {
      for (const writes of Object.values((input.RequestItems ?? {}) as Record<string, unknown[]>)) {
        for (const w of writes as { PutRequest?: { Item?: Item }; DeleteRequest?: { Key?: Item } }[]) {
          if (w.PutRequest?.Item) this.set(w.PutRequest.Item);
          if (w.DeleteRequest?.Key) this.sizes.delete(itemId(w.DeleteRequest.Key));
        }
      }
    }
  }

  /** What a successful call tells: items it returned whole, and a transaction's writes. */
  learn(operation: string, input: Record<string, unknown>, output: Record<string, unknown>): void {
    this.learnRequest(operation, input);
    if (operation === 'UpdateItem') {
      const key = input.Key as Item;
      if (input.ReturnValues === 'ALL_NEW' && output.Attributes) this.set(output.Attributes as Item);
      else this.grow(key, updateGrowth(input));
    }
    if (operation === 'GetItem' && output.Item && input.ProjectionExpression === undefined) {
      this.set(output.Item as Item);
    }
    const whole = input.ProjectionExpression === undefined;
    if ((operation === 'Query' || operation === 'Scan') && whole) {
      for (const item of (output.Items ?? []) as Item[]) this.set(item);
    }
    if (operation === 'BatchGetItem') {
      for (const [table, items] of Object.entries((output.Responses ?? {}) as Record<string, Item[]>)) {
        const asked = ((input.RequestItems ?? {}) as Record<string, { ProjectionExpression?: string }>)[
          table
        ];
        if (asked?.ProjectionExpression === undefined) for (const item of items) this.set(item);
      }
    }
    if (operation === 'TransactWriteItems') {
      for (const a of (input.TransactItems ?? []) as TransactAction[]) {
        if (a.Put?.Item) this.set(a.Put.Item);
        if (a.Update) this.grow(a.Update.Key, updateGrowth(a.Update));
        if (a.Delete) this.sizes.delete(itemId(a.Delete.Key));
      }
    }
  }

  /**
   * The write units AWS bills for a transaction: every action by the larger of its item's size
   * before and after (an update's after-size is bounded by what it writes); an item never seen
   * is taken to be under 1 KB.
   */
  transactionUnits(input: Record<string, unknown>): number {
    let units = 0;
    for (const a of (input.TransactItems ?? []) as TransactAction[]) {
      if (a.Put) units += transactionalUnits(Math.max(itemSize(a.Put.Item), this.known(a.Put.Item)));
      else if (a.Update) units += transactionalUnits(this.known(a.Update.Key) + updateGrowth(a.Update));
      else if (a.Delete) units += transactionalUnits(this.known(a.Delete.Key));
      else if (a.ConditionCheck) units += transactionalUnits(this.known(a.ConditionCheck.Key));
    }
    return units;
  }

  private known(key: Item | undefined): number {
    return this.sizes.get(itemId(key)) ?? 0;
  }

  private set(item: Item | undefined): void {
    if (item?.pk?.S) this.sizes.set(itemId(item), itemSize(item));
  }

  private grow(key: Item | undefined, by: number): void {
    const id = itemId(key);
    const size = this.sizes.get(id);
    if (size !== undefined) this.sizes.set(id, size + by);
  }
}

export class Meter {
  private tally: Tally = emptyTally();
  private readonly itemSizes = new ItemSizes();
  private readonly spans = new OpenSpans();

  /** Starts a new count; returns the one that ended. */
  reset(): Tally {
    const done = this.tally;
    this.tally = emptyTally();
    return done;
  }

  /**
   * Like `reset`, but the count that ends is first billed what every running invocation and
   * Express execution ran since it started or was last cut (`open-spans.ts`): for windows cut out
   * of a stream, where durations billed at their end would fall on either side of the edge.
   */
  cut(): Tally {
    for (const { key, ms } of this.spans.cut()) {
      if (key === EXPRESS_SPAN) {
        this.expressTally().billedMs += ms;
        continue;
      }
      const l = this.lambdaEntry(key);
      l.totalMs += ms;
      l.billedMs += ms;
    }
    return this.reset();
  }

  /** A deep copy of the count so far. */
  snapshot(): Tally {
    return structuredClone(this.tally);
  }

  sdkCall(
    service: string,
    operation: string,
    context: string,
    outcome: { error?: string },
    capacity: unknown,
    items: string[] = [],
  ) {
    const e = sdkEntry(this.tally, context, `${service}:${operation}`);
    e.calls++;
    if (items.length > 0) {
      e.items ??= {};
      for (const kind of items) e.items[kind] = (e.items[kind] ?? 0) + 1;
    }
    if (outcome.error) {
      e.errors++;
      if (
        CAPACITY_WRITES.has(operation) &&
        (outcome.error === 'ConditionalCheckFailedException' ||
          outcome.error === 'TransactionCanceledException')
      ) {
        e.refusedWrites++;
      }
    }
    const records: CapacityRecord[] = Array.isArray(capacity)
      ? (capacity as CapacityRecord[])
      : capacity
        ? [capacity as CapacityRecord]
        : [];
    for (const c of records) {
      const read = c.ReadCapacityUnits ?? (CAPACITY_READS.has(operation) ? (c.CapacityUnits ?? 0) : 0);
      const write = c.WriteCapacityUnits ?? (CAPACITY_WRITES.has(operation) ? (c.CapacityUnits ?? 0) : 0);
      e.rru += read;
      e.wru += write;
      const [only] = items;
      if (write > 0 && items.length === 1 && only !== undefined) {
        e.wruByItem ??= {};
        e.wruByItem[only] = (e.wruByItem[only] ?? 0) + write;
      }
    }
  }

  /** One invocation that took `ms` (counted when it ends). */
  lambda(role: string, ms: number): void {
    this.lambdaEnded(role, ms, this.lambdaStarted(role));
  }

  /**
   * An invocation counts where it starts and its duration where it ends, so that a long one (a
   * worker invocation that outlives the drain it served) still counts in the period it served.
   * Returns the span `lambdaEnded` is given, so that a `cut` can bill part of it earlier.
   */
  lambdaStarted(role: string): number {
    this.lambdaEntry(role).invocations++;
    this.logged(role, LAMBDA_PLATFORM_LOG_BYTES);
    return this.spans.start(role);
  }

  /** `bytes` of log lines written in `context`. */
  logged(context: string, bytes: number): void {
    this.tally.logs ??= {};
    this.tally.logs[context] = (this.tally.logs[context] ?? 0) + bytes;
  }

  lambdaEnded(role: string, ms: number, span?: number): void {
    const l = this.lambdaEntry(role);
    const billedBefore = this.spans.end(span);
    l.totalMs += Math.max(0, ms - billedBefore);
    l.billedMs += Math.max(0, Math.max(1, Math.ceil(ms)) - billedBefore);
  }

  private lambdaEntry(role: string): LambdaTally {
    this.tally.lambda[role] ??= { invocations: 0, totalMs: 0, billedMs: 0 };
    return this.tally.lambda[role];
  }

  transition(state: string, express = false): void {
    this.tally.transitions[state] = (this.tally.transitions[state] ?? 0) + 1;
    if (express) this.expressTally().transitions++;
  }

  /** Returns the span of an Express execution, which `expressEnded` is given. */
  executionStarted(express = false): number | undefined {
    this.tally.executions++;
    if (!express) return undefined;
    this.expressTally().executions++;
    return this.spans.start(EXPRESS_SPAN);
  }

  /** An Express lane ended after `ms` (billed in 100 ms steps). */
  expressEnded(ms: number, span?: number): void {
    const billedBefore = this.spans.end(span);
    this.expressTally().billedMs += Math.max(0, Math.max(100, Math.ceil(ms / 100) * 100) - billedBefore);
  }

  private expressTally() {
    this.tally.express ??= { executions: 0, transitions: 0, billedMs: 0 };
    return this.tally.express;
  }

  /** Adds counting (and `ReturnConsumedCapacity`) to a DynamoDB client. */
  instrumentDynamoDb(client: DynamoDBClient): DynamoDBClient {
    client.middlewareStack.add(
      (next, context) => async (args) => {
        const operation = String(context.commandName ?? 'Unknown').replace(/Command$/, '');
        const attributed = currentContext();
        const items = itemKinds(args.input);
        let call = args;
        if (CAPACITY_READS.has(operation) || CAPACITY_WRITES.has(operation)) {
          call = { ...args, input: { ...(args.input as object), ReturnConsumedCapacity: 'TOTAL' } };
        }
        try {
          const out = await next(call);
          const output = out.output as { ConsumedCapacity?: unknown };
          const reported = output.ConsumedCapacity;
          const input = args.input as Record<string, unknown>;
          // Priced before the sizes learn this call's writes: the before-image is what was stored.
          const capacity =
            operation === 'TransactWriteItems'
              ? [
                  {
                    WriteCapacityUnits: Math.max(
                      reportedUnits(reported),
                      this.itemSizes.transactionUnits(input),
                    ),
                  },
                ]
              : reported;
          this.itemSizes.learn(operation, input, out.output as unknown as Record<string, unknown>);
          this.sdkCall('DynamoDB', operation, attributed, {}, capacity, items);
          return out;
        } catch (err) {
          this.sdkCall(
            'DynamoDB',
            operation,
            attributed,
            { error: (err as Error).name ?? 'Error' },
            undefined,
            items,
          );
          throw err;
        }
      },
      { step: 'initialize', name: 'benchMeterDynamoDb' },
    );
    return client;
  }

  /** Adds counting to an SQS client. */
  instrumentSqs(client: SQSClient): SQSClient {
    client.middlewareStack.add(
      (next, context) => async (args) => {
        const operation = String(context.commandName ?? 'Unknown').replace(/Command$/, '');
        const attributed = currentContext();
        try {
          const out = await next(args);
          this.sdkCall('SQS', operation, attributed, {}, undefined);
          return out;
        } catch (err) {
          this.sdkCall('SQS', operation, attributed, { error: (err as Error).name ?? 'Error' }, undefined);
          throw err;
        }
      },
      { step: 'initialize', name: 'benchMeterSqs' },
    );
    return client;
  }
}

/** Sums a tally over the contexts `keep` accepts. */
export function sumSdk(t: Tally, keep: (context: string) => boolean) {
  const byOp: Record<string, SdkTally> = {};
  let sqsRequests = 0;
  let rru = 0;
  let wru = 0;
  let refusedWrites = 0;
  let dynamoCalls = 0;
  for (const [context, ops] of Object.entries(t.sdk)) {
    if (!keep(context)) continue;
    for (const [key, e] of Object.entries(ops)) {
      byOp[key] ??= { calls: 0, errors: 0, rru: 0, wru: 0, refusedWrites: 0 };
      const o = byOp[key];
      o.calls += e.calls;
      o.errors += e.errors;
      o.rru += e.rru;
      o.wru += e.wru;
      o.refusedWrites += e.refusedWrites;
      mergeItems(o, e);
      if (key.startsWith('SQS:')) sqsRequests += e.calls;
      if (key.startsWith('DynamoDB:')) dynamoCalls += e.calls;
      rru += e.rru;
      wru += e.wru;
      refusedWrites += e.refusedWrites;
    }
  }
  return { byOp, sqsRequests, dynamoCalls, rru, wru, refusedWrites };
}

/** Adds several tallies (e.g. one per run) into one. */
export function addTallies(tallies: Tally[]): Tally {
  const out = emptyTally();
  for (const t of tallies) {
    out.executions += t.executions;
    if (t.express && out.express) {
      out.express.executions += t.express.executions;
      out.express.transitions += t.express.transitions;
      out.express.billedMs += t.express.billedMs;
    }
    for (const [state, n] of Object.entries(t.transitions))
      out.transitions[state] = (out.transitions[state] ?? 0) + n;
    for (const [context, bytes] of Object.entries(t.logs ?? {})) {
      out.logs ??= {};
      out.logs[context] = (out.logs[context] ?? 0) + bytes;
    }
    for (const [role, l] of Object.entries(t.lambda)) {
      out.lambda[role] ??= { invocations: 0, totalMs: 0, billedMs: 0 };
      const o = out.lambda[role];
      o.invocations += l.invocations;
      o.totalMs += l.totalMs;
      o.billedMs += l.billedMs;
    }
    for (const [context, ops] of Object.entries(t.sdk)) {
      for (const [key, e] of Object.entries(ops)) {
        const o = sdkEntry(out, context, key);
        o.calls += e.calls;
        o.errors += e.errors;
        o.rru += e.rru;
        o.wru += e.wru;
        o.refusedWrites += e.refusedWrites;
        mergeItems(o, e);
      }
    }
  }
  return out;
}

function mergeItems(into: SdkTally, from: SdkTally): void {
  if (from.items) {
    into.items ??= {};
    for (const [kind, n] of Object.entries(from.items)) into.items[kind] = (into.items[kind] ?? 0) + n;
  }
  if (from.wruByItem) {
    into.wruByItem ??= {};
    for (const [kind, n] of Object.entries(from.wruByItem))
      into.wruByItem[kind] = (into.wruByItem[kind] ?? 0) + n;
  }
}
