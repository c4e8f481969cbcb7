/**
 * The engine's HostStore on the one Host table. Each responsibility lives in its own module
 * under `host-store/`: item codecs, single reads, listings, acceptance, Operation leases and
 * settlement; this class binds them to a client and a table.
 */
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { OperationRecord, OperationStatus, ResourceRecord } from '../../engine/model.ts';
import type {
  AcceptCreate,
  AcceptMutation,
  AcceptResult,
  HostStore,
  IdempotencyRecord,
  ListQuery,
  Settlement,
} from '../../engine/ports.ts';
import { acceptCreate, acceptMutation } from './host-store/acceptance.ts';
import type { HostTable } from './host-store/host-table.ts';
import { listReferences, listResources } from './host-store/listings.ts';
import { claimOperation, dueOperations, markDispatch, releaseLeases } from './host-store/operation-leases.ts';
import { settleOperation } from './host-store/operation-settlement.ts';
import {
  getClaim,
  getIdempotency,
  getOperation,
  getResource,
  getVersion,
  listClaims,
  uidByName,
} from './host-store/reads.ts';

export { keys, OBSERVABLE, toResource } from './host-store/items.ts';

export interface DynamoHostStoreOptions {
  client: DynamoDBClient;
  tableName: string;
  replayWindowSeconds: number;
}

export class DynamoHostStore implements HostStore {
  private readonly table: HostTable;
  private readonly windowMs: number;

  constructor(opts: DynamoHostStoreOptions) {
    this.table = { client: opts.client, table: opts.tableName };
    this.windowMs = opts.replayWindowSeconds * 1000;
  }

  /** The uid holding a (space, name) reservation, if any. */
  uidByName(space: string, name: string): Promise<string | undefined> {
    return uidByName(this.table, space, name);
  }

  getIdempotency(principal: string, key: string): Promise<IdempotencyRecord | undefined> {
    return getIdempotency(this.table, principal, key);
  }

  getOperation(id: string): Promise<OperationRecord | undefined> {
    return getOperation(this.table, id);
  }

  getResource(uid: string): Promise<ResourceRecord | undefined> {
    return getResource(this.table, uid);
  }

  listResources(q: ListQuery): Promise<ResourceRecord[]> {
    return listResources(this.table, q);
  }

  getClaim(key: string) {
    return getClaim(this.table, key);
  }

  listClaims(uid: string): Promise<string[]> {
    return listClaims(this.table, uid);
  }

  getVersion(key: string): Promise<number> {
    return getVersion(this.table, key);
  }

  listReferences(uid: string): Promise<string[]> {
    return listReferences(this.table, uid);
  }

  acceptCreate(input: AcceptCreate): Promise<AcceptResult> {
    return acceptCreate(this.table, input);
  }

  acceptUpdate(input: AcceptMutation): Promise<AcceptResult> {
    return acceptMutation(this.table, input, 'update');
  }

  acceptDelete(input: AcceptMutation): Promise<AcceptResult> {
    return acceptMutation(this.table, input, 'delete');
  }

  dueOperations(now: number, limit: number): Promise<{ id: string; status: OperationStatus }[]> {
    return dueOperations(this.table, now, limit);
  }

  releaseLeases(now: number): Promise<number> {
    return releaseLeases(this.table, now);
  }

  claimOperation(
    id: string,
    from: OperationStatus,
    token: string,
    now: number,
    leaseMs: number,
  ): Promise<OperationRecord | undefined> {
    return claimOperation(this.table, id, from, token, now, leaseMs);
  }

  markDispatch(id: string, token: string, now: number): Promise<boolean> {
    return markDispatch(this.table, id, token, now);
  }

  settleOperation(op: OperationRecord, token: string, now: number, s: Settlement): Promise<boolean> {
    return settleOperation(this.table, this.windowMs, op, token, now, s);
  }
}
