import type { Claim, Reference, VersionGuard } from './forms.ts';
import type {
  Effect,
  JsonObject,
  OperationError,
  OperationRecord,
  OperationStatus,
  ResourceRecord,
} from './model.ts';

export interface IdempotencyRecord {
  principal: string;
  key: string;
  operationId: string;
  fingerprint: string;
}

export type AcceptFailure =
  /** Another request registered this key first: re-read it and replay or refuse. */
  | { ok: false; reason: 'idempotency_race' }
  | { ok: false; reason: 'name_conflict' }
  | { ok: false; reason: 'not_found' }
  | { ok: false; reason: 'gone' }
  | { ok: false; reason: 'resource_busy' }
  | { ok: false; reason: 'generation_conflict' }
  /** A reference target is not live, or the Resource to delete is still referenced. */
  | { ok: false; reason: 'dependency_conflict'; detail: string }
  /** A claim is held by another Resource (e.g. the queue already has a consumer). */
  | { ok: false; reason: 'claim_conflict'; key: string }
  /** A version guard moved: re-run the checks and try again. */
  | { ok: false; reason: 'version_conflict' };

export type AcceptResult = { ok: true } | AcceptFailure;

export interface AcceptCreate {
  resource: ResourceRecord;
  operation: OperationRecord;
  idempotency: IdempotencyRecord;
  references: readonly Reference[];
  claims: readonly Claim[];
  versions: readonly VersionGuard[];
}

export interface AcceptMutation {
  uid: string;
  principal: string;
  expectedGeneration: number;
  operation: OperationRecord;
  idempotency: IdempotencyRecord;
  /** The new desired spec (update), or undefined (delete keeps the spec). */
  spec: JsonObject | undefined;
  /** References the new spec adds; each target must be live (update only). */
  addedReferences: readonly Reference[];
  /** Claims the Resource holds, with their new attributes (update only). */
  claims: readonly Claim[];
  versions: readonly VersionGuard[];
}

/** What the executor records when an Operation step ends. */
export interface Settlement {
  status: OperationStatus;
  effect: Effect;
  error: OperationError | undefined;
  /** Only for terminal settlements. */
  observed?: JsonObject;
  output?: JsonObject;
  /** For non-terminal settlements: when to look again. */
  nextAttemptAt?: number;
  /** Targets whose references end when this Operation succeeds (update, delete). */
  releasedReferences?: readonly string[];
  /** Claims the Resource gives up when this Operation succeeds (delete). */
  releasedClaims?: readonly string[];
}

export interface ListQuery {
  principal: string;
  afterUid: string | undefined;
  limit: number;
  space?: string;
  name?: string;
  form?: string;
}

/**
 * Durable state of the Host API. Every method is one conditional write or one read; the
 * DynamoDB adapter is the production implementation.
 */
export interface HostStore {
  getIdempotency(principal: string, key: string): Promise<IdempotencyRecord | undefined>;
  getOperation(id: string): Promise<OperationRecord | undefined>;
  getResource(uid: string): Promise<ResourceRecord | undefined>;
  /** Targets of the references a Resource holds (sealed at acceptance). */
  listReferences(uid: string): Promise<string[]>;
  /** Keys of the claims a Resource holds. */
  listClaims(uid: string): Promise<string[]>;
  getClaim(key: string): Promise<{ owner: string; attributes: Record<string, string | null> } | undefined>;
  getVersion(key: string): Promise<number>;
  /** Live (not deleted) Resources of a principal, ascending by uid, at most `limit`. */
  listResources(query: ListQuery): Promise<ResourceRecord[]>;

  /** One transaction: key, name, Resource, Operation and references (HA-06). */
  acceptCreate(input: AcceptCreate): Promise<AcceptResult>;
  /** One transaction: key, generation compare-and-set, Operation (HA-04, HA-07). */
  acceptUpdate(input: AcceptMutation): Promise<AcceptResult>;
  acceptDelete(input: AcceptMutation): Promise<AcceptResult>;

  /** Unfinished Operations due at `now` (queued, or leased work whose lease ran out). */
  /**
   * Ends every Operation lease still running at `now` (the executors that held them are known to
   * be dead: the local Host's data-folder lock); those Operations are due at once. Returns how many.
   */
  releaseLeases(now: number): Promise<number>;
  dueOperations(now: number, limit: number): Promise<{ id: string; status: OperationStatus }[]>;
  /**
   * Takes the lease if it is free or expired and the status is still `from`; a queued
   * Operation becomes running. Returns the claimed record.
   */
  claimOperation(
    id: string,
    from: OperationStatus,
    token: string,
    now: number,
    leaseMs: number,
  ): Promise<OperationRecord | undefined>;
  /** Records that a backend call may happen from now on (HA-15). False if the lease was lost. */
  markDispatch(id: string, token: string, now: number): Promise<boolean>;
  /** Writes the step's result and, when terminal, projects it onto the Resource. */
  settleOperation(op: OperationRecord, token: string, now: number, result: Settlement): Promise<boolean>;
}
