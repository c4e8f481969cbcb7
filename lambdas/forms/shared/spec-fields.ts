import { z } from 'zod';
import { SpecError } from '../../engine/forms.ts';
import { ID_PATTERN } from '../../engine/ids.ts';
import type { JsonObject } from '../../engine/model.ts';

/**
 * The Forms' spec schemas are written with these builders, and the same schemas are what the
 * Host validates with and what the field reference (`takoform explain`, docs/forms/) is rendered
 * from. Every field is checked for presence, JSON type and range, and unknown fields are refused.
 * Integers must be JSON numbers with an integral value ("10", 2.5, null, true are refused; 10.0 is
 * the number 10 — host-profile §5).
 */

/** What the field reference says of a field beyond its type and range. */
export interface FieldDoc {
  description: string;
  /** False when an update may not change it (the Resource must be re-created instead). */
  updatable: boolean;
  /** The value that applies when an optional field is left out. */
  default?: number;
  /** For a reference: the kind of Resource it must name. */
  refersTo?: 'queue' | 'worker';
}

declare module 'zod' {
  interface GlobalMeta {
    field?: FieldDoc;
  }
}

const required = (otherwise: string) => (issue: { input?: unknown }) =>
  issue.input === undefined ? 'is required' : otherwise;

/** An integer field in `min..max`. */
export function specInteger(min: number, max: number, doc: FieldDoc) {
  const range = `must be in ${min}..${max}`;
  return z
    .number({ error: required('must be an integer') })
    .int({ error: 'must be an integer' })
    .min(min, { error: range })
    .max(max, { error: range })
    .meta({ field: doc });
}

/** A reference object: exactly `{ "resourceUid": "<id>" }`. */
export function specReference(doc: FieldDoc & { refersTo: 'queue' | 'worker' }) {
  return z
    .strictObject(
      {
        resourceUid: z
          .string({ error: required('must be a Resource uid') })
          .regex(ID_PATTERN, { error: 'must be a Resource uid' }),
      },
      { error: required('must be a JSON object') },
    )
    .meta({ field: doc });
}

/** A closed spec object. */
export function specObject<S extends z.core.$ZodLooseShape>(shape: S) {
  return z.strictObject(shape, { error: required('must be a JSON object') });
}

/** The first problem, worded for the Problem's detail; an unknown field before a missing one (a misspelling). */
function messageOf(issues: readonly z.core.$ZodIssue[]): string {
  const issue = issues.find((i) => i.code === 'unrecognized_keys') ?? issues[0];
  if (!issue) return 'spec is invalid';
  const where = issue.path.length > 0 ? issue.path.join('.') : 'spec';
  if (issue.code === 'unrecognized_keys') {
    return `${where} has an unknown field ${JSON.stringify((issue.keys[0] ?? '').slice(0, 64))}`;
  }
  return `${where} ${issue.message}`;
}

/** Validates `value` against a spec schema; a refusal is a `SpecError` (422 invalid_spec). */
export function parseSpec<T>(schema: z.ZodType<T>, value: unknown): T & JsonObject {
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw new SpecError(messageOf(parsed.error.issues));
  return parsed.data as T & JsonObject;
}

/** The field reference's view of one field of a spec schema. */
export interface FieldInfo extends FieldDoc {
  name: string;
  type: 'integer' | 'reference';
  required: boolean;
  min?: number;
  max?: number;
}

/** Every field of a spec schema, in its order, with its type, range and documentation. */
export function fieldsOf(schema: z.ZodObject): FieldInfo[] {
  return Object.entries(schema.shape).map(([name, field]) => {
    const optional = field instanceof z.ZodOptional;
    const inner = (optional ? field.unwrap() : field) as z.ZodType;
    const doc = inner.meta()?.field;
    if (!doc) throw new Error(`spec field ${name} has no documentation`);
    if (inner instanceof z.ZodNumber) {
      return {
        name,
        type: 'integer',
        required: !optional,
        min: inner.minValue ?? undefined,
        max: inner.maxValue ?? undefined,
        ...doc,
      } as FieldInfo;
    }
    return { name, type: 'reference', required: !optional, ...doc };
  });
}

/** Fields an update may not change: kept as they were, or the update is refused. */
export function fixedFields(schema: z.ZodObject): string[] {
  return fieldsOf(schema)
    .filter((f) => !f.updatable)
    .map((f) => f.name);
}

export type { JsonObject };
