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
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { SQSClient } from '@aws-sdk/client-sqs';

const contexts = new AsyncLocalStorage<string>();

/** Runs `fn` with every SDK call inside it attributed to `name`. */
export function attribute<T>(name: string, fn: () => T): T {
  return contexts.run(name, fn);
}

export const currentContext = (): string => contexts.getStore() ?? 'unattributed';

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
  /** State name → entries (retries are counted as extra entries, as AWS bills them). */
  transitions: Record<string, number>;
  executions: number;
}

const emptyTally = (): Tally => ({ sdk: {}, lambda: {}, transitions: {}, executions: 0 });

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

export class Meter {
  private tally: Tally = emptyTally();

  /** Starts a new count; returns the one that ended. */
  reset(): Tally {
    const done = this.tally;
    this.tally = emptyTally();
    return done;
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
  ) {
    const e = sdkEntry(this.tally, context, `${service}:${operation}`);
    e.calls++;
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
    }
  }

  lambda(role: string, ms: number): void {
    this.tally.lambda[role] ??= { invocations: 0, totalMs: 0, billedMs: 0 };
    const l = this.tally.lambda[role];
    l.invocations++;
    l.totalMs += ms;
    l.billedMs += Math.max(1, Math.ceil(ms));
  }

  transition(state: string): void {
    this.tally.transitions[state] = (this.tally.transitions[state] ?? 0) + 1;
  }

  executionStarted(): void {
    this.tally.executions++;
  }

  /** Adds counting (and `ReturnConsumedCapacity`) to a DynamoDB client. */
  instrumentDynamoDb(client: DynamoDBClient): DynamoDBClient {
    client.middlewareStack.add(
      (next, context) => async (args) => {
        const operation = String(context.commandName ?? 'Unknown').replace(/Command$/, '');
        const attributed = currentContext();
        let call = args;
        if (CAPACITY_READS.has(operation) || CAPACITY_WRITES.has(operation)) {
          call = { ...args, input: { ...(args.input as object), ReturnConsumedCapacity: 'TOTAL' } };
        }
        try {
          const out = await next(call);
          const output = out.output as { ConsumedCapacity?: unknown };
          this.sdkCall('DynamoDB', operation, attributed, {}, output.ConsumedCapacity);
          return out;
        } catch (err) {
          this.sdkCall(
            'DynamoDB',
            operation,
            attributed,
            { error: (err as Error).name ?? 'Error' },
            undefined,
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
    for (const [state, n] of Object.entries(t.transitions))
      out.transitions[state] = (out.transitions[state] ?? 0) + n;
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
      }
    }
  }
  return out;
}
