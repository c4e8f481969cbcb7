/** The Host API v2 records as the engine sees them (host-api-v2.md §6, §8). */

export type Phase = 'pending' | 'idle' | 'deleting' | 'error';
export type Action = 'create' | 'update' | 'delete';
export type OperationStatus = 'queued' | 'running' | 'waiting_input' | 'reconciling' | 'succeeded' | 'failed';
export type Effect = 'none' | 'unknown' | 'partial' | 'complete';
export type JsonObject = { [key: string]: unknown };

export interface ResourceRecord {
  uid: string;
  principal: string;
  form: string;
  space: string;
  name: string;
  generation: number;
  observedGeneration: number;
  observedAt: string | null;
  phase: Phase;
  spec: JsonObject;
  observed: JsonObject;
  output: JsonObject;
  lastOperation: string;
  /** The unfinished mutation, if any: one per uid (HA-07). */
  busyOperation: string | undefined;
  /** Set once a delete succeeded: the record stays for replay and 410, out of lists. */
  deletedAt: string | undefined;
}

export interface OperationError {
  code: string;
  message: string;
}

export interface OperationRecord {
  id: string;
  resourceUid: string;
  principal: string;
  action: Action;
  generation: number;
  status: OperationStatus;
  effect: Effect;
  createdAt: string;
  updatedAt: string;
  retainUntil: string;
  error: OperationError | undefined;
  /** The Idempotency-Key that accepted it, so the replay mapping expires with it. */
  idempotencyKey: string;
  /** What the executor needs without reading the Resource. */
  form: string;
  space: string;
  name: string;
  spec: JsonObject;
  /** Set before any backend call: after it, a restart may only reconcile (HA-15, RC-02). */
  dispatchPossible: boolean;
  attempts: number;
  nextAttemptAt: number;
  leaseToken: string | undefined;
  leaseUntil: number;
}

export const TERMINAL: ReadonlySet<OperationStatus> = new Set(['succeeded', 'failed']);

/** The Operation as clients see it. */
export function publicOperation(op: OperationRecord) {
  const out: Record<string, unknown> = {
    id: op.id,
    resourceUid: op.resourceUid,
    action: op.action,
    generation: op.generation,
    status: op.status,
    effect: op.effect,
    createdAt: op.createdAt,
    updatedAt: op.updatedAt,
    retainUntil: op.retainUntil,
  };
  if (op.error && (op.status === 'failed' || op.status === 'reconciling')) out.error = op.error;
  return out;
}

/** The Resource as clients see it. */
export function publicResource(r: ResourceRecord) {
  return {
    uid: r.uid,
    form: r.form,
    space: r.space,
    name: r.name,
    generation: r.generation,
    observedGeneration: r.observedGeneration,
    observedAt: r.observedAt,
    phase: r.phase,
    spec: r.spec,
    observed: r.observed,
    output: r.output,
    lastOperation: r.lastOperation,
  };
}
