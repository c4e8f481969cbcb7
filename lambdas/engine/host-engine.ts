import { crashPoint } from '../shared/crash-points.ts';
import { canRead, canWrite, type Principal } from './auth.ts';
import type { CursorCodec } from './cursor.ts';
import {
  type Form,
  type FormReads,
  type FormRegistry,
  type Prepared,
  type PrepareInput,
  type Reference,
  SpecError,
} from './forms.ts';
import { HostError } from './host-error.ts';
import { newOperationId, newResourceUid } from './ids.ts';
import type { Action, JsonObject, OperationRecord, ResourceRecord } from './model.ts';
import type { AcceptFailure, AcceptResult, HostStore, IdempotencyRecord } from './ports.ts';

/** `QueueConsumer` of `https://…/forms/QueueConsumer/0.3.0/`, for messages. */
function formName(url: string): string {
  return /\/forms\/([^/]+)\//.exec(url)?.[1] ?? url;
}

/** How often an acceptance is re-checked when a concurrent change moved a version guard. */
const MAX_GUARD_RETRIES = 5;

export interface HostEngineOptions {
  store: HostStore;
  forms: FormRegistry;
  cursors: CursorCodec;
  replayWindowSeconds: number;
  clock?: () => number;
  /** Called after an Operation is accepted, to start the executor without waiting for a sweep. */
  onAccepted?: (operationId: string) => void;
}

export interface CreateInput {
  form: string;
  space: string;
  name: string;
  spec: unknown;
}

export interface ListInput {
  space?: string;
  name?: string;
  form?: string;
  limit: number;
  cursor?: string;
}

/**
 * Host API v2 semantics over a HostStore: authorization, replay, validation and atomic
 * acceptance. It never calls a backend; the executor does that in the background.
 */
export class HostEngine {
  private readonly store: HostStore;
  private readonly forms: FormRegistry;
  private readonly cursors: CursorCodec;
  private readonly windowMs: number;
  private readonly clock: () => number;
  private readonly onAccepted: (id: string) => void;

  constructor(opts: HostEngineOptions) {
    this.store = opts.store;
    this.forms = opts.forms;
    this.cursors = opts.cursors;
    this.windowMs = opts.replayWindowSeconds * 1000;
    this.clock = opts.clock ?? Date.now;
    this.onAccepted = opts.onAccepted ?? (() => {});
  }

  /** Same key and same request: the original Operation; same key, other request: 409 (HA-05). */
  private async replay(p: Principal, key: string, fingerprint: string): Promise<OperationRecord | undefined> {
    const existing = await this.store.getIdempotency(p.id, key);
    if (!existing) return undefined;
    return this.answerReplay(existing, fingerprint);
  }

  private async answerReplay(existing: IdempotencyRecord, fingerprint: string): Promise<OperationRecord> {
    if (existing.fingerprint !== fingerprint) {
      throw new HostError('idempotency_conflict', 'this Idempotency-Key was used for a different request');
    }
    const op = await this.store.getOperation(existing.operationId);
    if (!op) throw new HostError('gone', 'the Operation of this Idempotency-Key is no longer retained');
    return op;
  }

  /** After a lost race on the key, answer with the winner (or a conflict). */
  private async afterRace(p: Principal, key: string, fingerprint: string): Promise<OperationRecord> {
    const winner = await this.store.getIdempotency(p.id, key);
    if (!winner) throw new HostError('temporarily_unavailable', 'retry with the same Idempotency-Key');
    return this.answerReplay(winner, fingerprint);
  }

  private newOperation(
    p: Principal,
    r: Pick<ResourceRecord, 'uid' | 'form' | 'space' | 'name'>,
    action: Action,
    generation: number,
    spec: JsonObject,
    key: string,
    now: number,
  ): OperationRecord {
    const at = new Date(now).toISOString();
    return {
      id: newOperationId(now),
      resourceUid: r.uid,
      principal: p.id,
      action,
      generation,
      status: 'queued',
      effect: 'none',
      createdAt: at,
      updatedAt: at,
      retainUntil: new Date(now + this.windowMs).toISOString(),
      error: undefined,
      idempotencyKey: key,
      form: r.form,
      space: r.space,
      name: r.name,
      spec,
      dispatchPossible: false,
      attempts: 0,
      nextAttemptAt: now,
      leaseToken: undefined,
      leaseUntil: 0,
    };
  }

  private validate(run: () => JsonObject): JsonObject {
    try {
      return run();
    } catch (err) {
      if (err instanceof SpecError) throw new HostError('invalid_spec', err.message);
      throw err;
    }
  }

  private refuse(failure: AcceptFailure): never {
    switch (failure.reason) {
      case 'name_conflict':
        throw new HostError('name_conflict', 'the name is in use in this Space');
      case 'not_found':
        throw new HostError('not_found');
      case 'gone':
        throw new HostError('gone', 'the Resource was deleted');
      case 'resource_busy':
        throw new HostError('resource_busy', 'another Operation on this Resource is unfinished');
      case 'generation_conflict':
        throw new HostError(
          'generation_conflict',
          'Takoform-Expected-Generation is not the current generation',
        );
      case 'dependency_conflict':
        throw new HostError('dependency_conflict', failure.detail);
      case 'claim_conflict':
        throw new HostError(
          'dependency_conflict',
          'another live Resource already holds this role (e.g. the queue has a consumer)',
        );
      default:
        throw new HostError('temporarily_unavailable');
    }
  }

  async create(p: Principal, key: string, input: CreateInput, fingerprint: string): Promise<OperationRecord> {
    if (!canWrite(p, input.space)) throw new HostError('forbidden', 'no write access to this Space');
    const replayed = await this.replay(p, key, fingerprint);
    if (replayed) return replayed;
    const form = this.forms.get(input.form);
    if (!form) throw new HostError('unsupported_form', 'this Host does not serve that Form');
    const spec = this.validate(() => form.validateCreate(input.spec));
    const uid = newResourceUid(this.clock());
    for (let attempt = 1; ; attempt++) {
      const prepared = await this.prepare(form, {
        action: 'create',
        principal: p.id,
        space: input.space,
        uid,
        spec,
      });
      const result = await this.acceptCreate(p, key, input, fingerprint, uid, spec, prepared);
      if (result !== 'retry') return result;
      if (attempt >= MAX_GUARD_RETRIES)
        throw new HostError('temporarily_unavailable', 'concurrent changes; retry');
    }
  }

  /** The Form's cross-Resource checks; by default its references, nothing exclusive. */
  private async prepare(form: Form, input: PrepareInput): Promise<Prepared> {
    if (form.prepare) return form.prepare(input, this.reads);
    return { references: form.references?.(input.spec) ?? [], claims: [], versions: [] };
  }

  private readonly reads: FormReads = {
    getResource: (uid) => this.store.getResource(uid),
    getClaim: (key) => this.store.getClaim(key),
    getVersion: (key) => this.store.getVersion(key),
  };

  private async acceptCreate(
    p: Principal,
    key: string,
    input: CreateInput,
    fingerprint: string,
    uid: string,
    spec: JsonObject,
    prepared: Prepared,
  ): Promise<OperationRecord | 'retry'> {
    const now = this.clock();
    const ids = { uid, form: input.form, space: input.space, name: input.name };
    const operation = this.newOperation(p, ids, 'create', 1, spec, key, now);
    const resource: ResourceRecord = {
      ...ids,
      principal: p.id,
      generation: 1,
      observedGeneration: 0,
      observedAt: null,
      phase: 'pending',
      spec,
      observed: {},
      output: {},
      lastOperation: operation.id,
      busyOperation: operation.id,
      deletedAt: undefined,
    };
    const result = await this.store.acceptCreate({
      resource,
      operation,
      idempotency: { principal: p.id, key, operationId: operation.id, fingerprint },
      references: prepared.references,
      claims: prepared.claims,
      versions: prepared.versions,
    });
    return this.accepted(result, operation, p, key, fingerprint);
  }

  private async accepted(
    result: AcceptResult,
    operation: OperationRecord,
    p: Principal,
    key: string,
    fingerprint: string,
  ): Promise<OperationRecord | 'retry'> {
    if (!result.ok && result.reason === 'version_conflict') return 'retry';
    if (result.ok) {
      crashPoint('operation.after-accept');
      this.onAccepted(operation.id);
      return operation;
    }
    if (result.reason === 'idempotency_race') return this.afterRace(p, key, fingerprint);
    return this.refuse(result);
  }

  /** The owned, readable Resource or 404: others' Resources do not exist for the caller (HA-03). */
  private async owned(p: Principal, uid: string): Promise<ResourceRecord> {
    const r = await this.store.getResource(uid);
    if (!r || r.principal !== p.id || !canRead(p, r.space)) throw new HostError('not_found');
    return r;
  }

  private async mutate(
    action: 'update' | 'delete',
    p: Principal,
    uid: string,
    key: string,
    expectedGeneration: number,
    fingerprint: string,
    specInput: unknown,
  ): Promise<OperationRecord> {
    const current = await this.owned(p, uid);
    if (!canWrite(p, current.space)) throw new HostError('forbidden', 'no write access to this Space');
    const replayed = await this.replay(p, key, fingerprint);
    if (replayed) return replayed;
    if (current.deletedAt) throw new HostError('gone', 'the Resource was deleted');
    if (current.busyOperation)
      throw new HostError('resource_busy', 'another Operation on this Resource is unfinished');
    if (current.generation !== expectedGeneration) {
      throw new HostError(
        'generation_conflict',
        'Takoform-Expected-Generation is not the current generation',
      );
    }
    const form = this.forms.get(current.form);
    if (!form)
      throw new HostError('unsupported_form', 'this Host no longer serves the Form of this Resource');
    const spec =
      action === 'update' ? this.validate(() => form.validateUpdate(specInput, current.spec)) : undefined;
    for (let attempt = 1; ; attempt++) {
      let prepared: Prepared = { references: [], claims: [], versions: [] };
      let addedReferences: Reference[] = [];
      if (spec) {
        prepared = await this.prepare(form, {
          action: 'update',
          principal: p.id,
          space: current.space,
          uid,
          spec,
        });
        const held = new Set(await this.store.listReferences(uid));
        addedReferences = prepared.references.filter((r) => !held.has(r.resourceUid));
      }
      const result = await this.acceptMutation(
        action,
        p,
        current,
        key,
        expectedGeneration,
        fingerprint,
        spec,
        {
          ...prepared,
          references: addedReferences,
        },
      );
      if (result !== 'retry') return result;
      if (attempt >= MAX_GUARD_RETRIES)
        throw new HostError('temporarily_unavailable', 'concurrent changes; retry');
    }
  }

  private async acceptMutation(
    action: 'update' | 'delete',
    p: Principal,
    current: ResourceRecord,
    key: string,
    expectedGeneration: number,
    fingerprint: string,
    spec: JsonObject | undefined,
    prepared: Prepared,
  ): Promise<OperationRecord | 'retry'> {
    const uid = current.uid;
    const now = this.clock();
    const operation = this.newOperation(
      p,
      current,
      action,
      current.generation + 1,
      spec ?? current.spec,
      key,
      now,
    );
    const input = {
      uid,
      principal: p.id,
      expectedGeneration,
      operation,
      idempotency: { principal: p.id, key, operationId: operation.id, fingerprint },
      spec,
      addedReferences: prepared.references,
      claims: prepared.claims,
      versions: prepared.versions,
    };
    let result =
      action === 'update' ? await this.store.acceptUpdate(input) : await this.store.acceptDelete(input);
    if (action === 'delete' && !result.ok && result.reason === 'dependency_conflict') {
      result = { ...result, detail: await this.stillReferenced(current) };
    }
    return this.accepted(result, operation, p, key, fingerprint);
  }

  /**
   * The detail of a refused delete: which Resources still refer to `target`, and as what, so the
   * caller knows what to delete or change first. Read only after the refusal (it is rare), from
   * the owner's Resources in the Space, the only ones a reference may come from.
   */
  private async stillReferenced(target: ResourceRecord): Promise<string> {
    const found: string[] = [];
    const page = 100;
    for (let after: string | undefined; ; ) {
      const rows = await this.store.listResources({
        principal: target.principal,
        space: target.space,
        afterUid: after,
        limit: page,
      });
      for (const r of rows) {
        const roles = (this.forms.get(r.form)?.references?.(r.spec) ?? [])
          .filter((ref) => ref.resourceUid === target.uid)
          .map((ref) => ref.role);
        if (r.deletedAt || roles.length === 0) continue;
        const busy = r.phase === 'deleting' ? ', being deleted: retry once it is gone' : '';
        found.push(`${formName(r.form)} ${r.name} (as ${roles.join(' and ')}${busy})`);
      }
      after = rows.at(-1)?.uid;
      if (rows.length < page || found.length >= 10) break;
    }
    const what = `${formName(target.form)} ${target.name} is still referenced`;
    return found.length === 0
      ? `${what} by another Resource`
      : `${what} by ${found.join(', ')}: delete or change ${found.length === 1 ? 'it' : 'them'} first`;
  }

  update(p: Principal, uid: string, key: string, gen: number, spec: unknown, fp: string) {
    return this.mutate('update', p, uid, key, gen, fp, spec);
  }

  delete(p: Principal, uid: string, key: string, gen: number, fp: string) {
    return this.mutate('delete', p, uid, key, gen, fp, undefined);
  }

  async getResource(p: Principal, uid: string): Promise<ResourceRecord> {
    const r = await this.owned(p, uid);
    if (r.deletedAt) throw new HostError('gone', 'the Resource was deleted');
    return r;
  }

  async getOperation(p: Principal, id: string): Promise<OperationRecord> {
    const op = await this.store.getOperation(id);
    const expired =
      op &&
      Date.parse(op.retainUntil) < this.clock() &&
      (op.status === 'succeeded' || op.status === 'failed');
    if (!op || expired || op.principal !== p.id || !canRead(p, op.space)) throw new HostError('not_found');
    return op;
  }

  async list(p: Principal, q: ListInput): Promise<{ items: ResourceRecord[]; nextCursor: string | null }> {
    const binding = { principal: p.id, space: q.space, name: q.name, form: q.form };
    let afterUid: string | undefined;
    if (q.cursor !== undefined) {
      afterUid = this.cursors.decode(q.cursor, binding);
      if (afterUid === undefined)
        throw new HostError('invalid_request', 'the cursor is not valid for this list');
    }
    // Unreadable rows (a key without that Space) are skipped before paging, so that neither the
    // page size nor the cursor (its payload is the last uid) reveals them (HA-11).
    const readable: ResourceRecord[] = [];
    for (let after = afterUid; ; ) {
      const rows = await this.store.listResources({ ...binding, afterUid: after, limit: q.limit + 1 });
      readable.push(...rows.filter((r) => canRead(p, r.space)));
      const lastRow = rows.at(-1);
      if (readable.length > q.limit || rows.length <= q.limit || !lastRow) break;
      after = lastRow.uid;
    }
    const page = readable.slice(0, q.limit);
    const last = page.at(-1);
    const nextCursor = readable.length > q.limit && last ? this.cursors.encode(last.uid, binding) : null;
    return { items: page, nextCursor };
  }
}
