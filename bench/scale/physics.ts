/**
 * The stand-ins' throughput physics for one scale case: a DynamoDB physics proxy of its own in
 * front of the bench's DynamoDB Local (so each case starts with fresh budgets and counts) and a
 * Lambda concurrency pool and Step Functions StartExecution quota of its own, all at the scale k. What they counted in a window is read
 * as the difference of two snapshots.
 */

import type { PhysicsStats } from '../../lambdas/local/physics/dynamodb-physics.ts';
import {
  type PhysicsProxy,
  startDynamoDbPhysicsProxy,
} from '../../lambdas/local/physics/dynamodb-physics-proxy.ts';
import { LambdaConcurrency } from '../../lambdas/local/physics/lambda-concurrency.ts';
import { type Physics, physicsOf } from '../../lambdas/local/physics/physics-config.ts';
import {
  StartExecutionBudget,
  type StartExecutionStats,
} from '../../lambdas/local/physics/start-execution-budget.ts';
import type { Endpoints } from '../support/standins.ts';
import type { PhysicsCounts } from './model.ts';

export interface CasePhysics {
  physics: Physics;
  endpoints: Endpoints;
  concurrency: LambdaConcurrency;
  startBudget: StartExecutionBudget;
  proxy: PhysicsProxy;
  mark(): PhysicsMark;
  /** Runs `fn` with the DynamoDB physics off (setup and pre-fill, which no figure measures). */
  paused<T>(fn: () => Promise<T>): Promise<T>;
  since(m: PhysicsMark): PhysicsCounts;
  stop(): Promise<void>;
}

export interface PhysicsMark {
  dynamo: PhysicsStats;
  throttled: Record<string, number>;
  starts: StartExecutionStats;
}

/** Every partition the model knows (the snapshot's `top` is a count). */
const ALL = 1_000_000;

/** `bench-<uuid>:DISPATCH#<id>` → `DISPATCH#…`: the table is the case's own, ids differ per run. */
export function foldName(name: string): string {
  const noTable = name.replace(/^bench-[0-9a-f-]{36}(?=[:/])[:]?/, '');
  return noTable.replace(/#[A-Za-z0-9_-]{16,}/g, '#…');
}

function fold(r: Record<string, number>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [k, v] of Object.entries(r)) out[foldName(k)] = (out[foldName(k)] ?? 0) + v;
  return out;
}

/** What the physics counted between two snapshots (the partitions that consumed in between). */
export function physicsDelta(a: PhysicsMark, b: PhysicsMark, peak: Record<string, number>): PhysicsCounts {
  const before = new Map(a.dynamo.partitions.map((p) => [p.partition, p]));
  const conflicts: Record<string, number> = {};
  for (const [item, n] of Object.entries(b.dynamo.conflictsByItem)) {
    const d = n - (a.dynamo.conflictsByItem[item] ?? 0);
    if (d > 0) conflicts[item] = d;
  }
  const partitions = b.dynamo.partitions.flatMap((p) => {
    const o = before.get(p.partition);
    const writeUnits = p.writeUnits - (o?.writeUnits ?? 0);
    const readUnits = p.readUnits - (o?.readUnits ?? 0);
    const throttles = p.throttles - (o?.throttles ?? 0);
    return writeUnits + readUnits + throttles > 0
      ? [{ partition: foldName(p.partition), writeUnits, readUnits, throttles }]
      : [];
  });
  const lambdaThrottled: Record<string, number> = {};
  for (const [fn, n] of Object.entries(b.throttled)) {
    const d = n - (a.throttled[fn] ?? 0);
    if (d > 0) lambdaThrottled[fn] = d;
  }
  const startsThrottled: Record<string, number> = {};
  for (const kind of ['standard', 'express'] as const) {
    const d = b.starts.throttled[kind] - a.starts.throttled[kind];
    if (d > 0) startsThrottled[kind] = d;
  }
  const startsFailed =
    b.starts.failed.standard + b.starts.failed.express - a.starts.failed.standard - a.starts.failed.express;
  return {
    cancelledTransactions: b.dynamo.cancelledTransactions - a.dynamo.cancelledTransactions,
    refusedWrites: b.dynamo.refusedWrites - a.dynamo.refusedWrites,
    throttled: b.dynamo.throttled - a.dynamo.throttled,
    conflictsByItem: fold(conflicts),
    partitions: partitions
      .sort((x, y) => y.writeUnits + y.readUnits / 3 - (x.writeUnits + x.readUnits / 3))
      .slice(0, 20),
    lambdaThrottled,
    lambdaPeak: { ...peak },
    startsThrottled,
    startsFailed,
  };
}

export async function startCasePhysics(
  endpoints: Endpoints,
  o: { k: number; transactionMs: number },
): Promise<CasePhysics> {
  // The Host's default reservations (as the CDK deploys them), scaled like the account's pool.
  const physics = physicsOf({ scale: o.k, transactionMs: o.transactionMs });
  const proxy = await startDynamoDbPhysicsProxy({ target: endpoints.dynamodb, physics });
  const concurrency = new LambdaConcurrency(physics.lambda, physics.scale);
  const startBudget = new StartExecutionBudget(physics.startExecution);
  // Creating a thousand consumers side by side under a 100 ms hold would fail on conflicts the
  // measured windows never meet; while paused, every request is admitted and holds nothing.
  let pausedBy = 0;
  const model = proxy.model;
  const begin = model.begin.bind(model);
  model.begin = (op, body, schemas) =>
    pausedBy > 0
      ? { op, holds: [], transaction: false, startedAt: Date.now(), body }
      : begin(op, body, schemas);
  const mark = (): PhysicsMark => ({
    dynamo: proxy.model.snapshot(ALL),
    throttled: { ...concurrency.stats().throttled },
    starts: startBudget.stats(),
  });
  return {
    physics,
    endpoints: { ...endpoints, dynamodb: proxy.endpoint },
    concurrency,
    startBudget,
    proxy,
    mark,
    since: (m) => physicsDelta(m, mark(), concurrency.stats().peak),
    paused: async (fn) => {
      pausedBy++;
      try {
        return await fn();
      } finally {
        pausedBy--;
      }
    },
    stop: () => proxy.stop(),
  };
}
