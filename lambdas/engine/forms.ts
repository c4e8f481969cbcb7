import type { Action, JsonObject, ResourceRecord } from './model.ts';

/** What a backend says after executing or reconciling one step of an Operation. */
export type Outcome =
  | { kind: 'complete'; observed?: JsonObject; output?: JsonObject }
  | { kind: 'partial'; code: string; message: string; observed?: JsonObject; output?: JsonObject }
  | { kind: 'no_effect'; code: string; message: string }
  | { kind: 'unknown'; code?: string; message?: string }
  /** A bounded step is done; call reconcile again after `delayMs`. */
  | { kind: 'continue'; delayMs?: number };

export interface Execution {
  readonly operationId: string;
  readonly action: Action;
  readonly resourceUid: string;
  readonly space: string;
  readonly name: string;
  readonly generation: number;
  readonly spec: JsonObject;
  readonly attempt: number;
}

export interface Backend {
  /** First dispatch of a step. May run again only if the previous call was proven not sent. */
  execute(exec: Execution): Promise<Outcome>;
  /** After a possible dispatch: find out what happened, finishing the work idempotently. */
  reconcile(exec: Execution): Promise<Outcome>;
}

/** A reference from a spec to another Resource: `{resourceUid}` in the same Space, exact Form. */
export interface Reference {
  readonly resourceUid: string;
  readonly form: string;
  /** Names the field, for error details: "queue", "worker", "deadLetterQueue". */
  readonly role: string;
}

/**
 * An exclusive claim held by a Resource, e.g. "the consumer of queue X". Created with the
 * Resource (refused if held), updated by its owner, released when the owner is deleted.
 */
export interface Claim {
  readonly key: string;
  readonly attributes: Readonly<Record<string, string | null>>;
}

/** Optimistic guard: the acceptance commits only if the counter `key` is still `expected`, and bumps it. */
export interface VersionGuard {
  readonly key: string;
  readonly expected: number;
}

/** What a Form needs in order to check cross-Resource rules before acceptance. */
export interface FormReads {
  getResource(uid: string): Promise<ResourceRecord | undefined>;
  getClaim(key: string): Promise<{ owner: string; attributes: Record<string, string | null> } | undefined>;
  getVersion(key: string): Promise<number>;
}

export interface PrepareInput {
  readonly action: 'create' | 'update';
  readonly principal: string;
  readonly space: string;
  readonly uid: string;
  readonly spec: JsonObject;
}

/** Cross-Resource checks and the atomic guards that make them hold under concurrency. */
export interface Prepared {
  readonly references: readonly Reference[];
  /** Created with the Resource (create) or updated by it (update). */
  readonly claims: readonly Claim[];
  readonly versions: readonly VersionGuard[];
}

/** Thrown by validators; becomes `422 invalid_spec` with the message as detail. */
export class SpecError extends Error {
  override name = 'SpecError';
}

/** A Form plug-in. The engine never imports a concrete Form; the composition module wires them. */
export interface Form {
  readonly url: string;
  /** Validates a create spec and returns the spec to store (closed, exact). */
  validateCreate(spec: unknown): JsonObject;
  /** Validates an update against the current spec (immutable fields stay). */
  validateUpdate(spec: unknown, current: JsonObject): JsonObject;
  /** Outbound references of a spec; checked live before acceptance and sealed with it. */
  references?(spec: JsonObject): Reference[];
  /**
   * Cross-Resource rules checked before acceptance (refusing with a HostError), returning the
   * claims and guards the store commits atomically with it. Defaults to `references` only.
   */
  prepare?(input: PrepareInput, reads: FormReads): Promise<Prepared>;
  readonly backend: Backend;
  /**
   * A read-only look at what a settled Resource's `observed` says now (the background refresh,
   * `resource-observer.ts`); undefined when it cannot tell, so a failed check refreshes nothing.
   * Never changes anything outside the Host.
   */
  observe?(resource: ResourceRecord): Promise<JsonObject | undefined>;
}

export type FormRegistry = ReadonlyMap<string, Form>;

export function formRegistry(forms: Form[]): FormRegistry {
  return new Map(forms.map((f) => [f.url, f]));
}
