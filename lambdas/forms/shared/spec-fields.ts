import { SpecError } from '../../engine/forms.ts';
import { ID_PATTERN } from '../../engine/ids.ts';
import type { JsonObject } from '../../engine/model.ts';

/**
 * Closed-spec readers shared by the Forms: every field is checked for presence, JSON type and
 * range, and unknown fields are refused. Integers must be JSON numbers with an integral value
 * ("10", 2.5, null, true are refused; 10.0 is the number 10 — host-profile §5).
 */
export function closedObject(
  value: unknown,
  where: string,
  allowed: readonly string[],
): Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new SpecError(`${where} must be a JSON object`);
  }
  for (const key of Object.keys(value)) {
    if (!allowed.includes(key))
      throw new SpecError(`${where} has an unknown field ${JSON.stringify(key.slice(0, 64))}`);
  }
  return value as Record<string, unknown>;
}

export function integerField(
  obj: Record<string, unknown>,
  field: string,
  min: number,
  max: number,
  required: boolean,
): number | undefined {
  if (!(field in obj)) {
    if (required) throw new SpecError(`${field} is required`);
    return undefined;
  }
  const v = obj[field];
  if (typeof v !== 'number' || !Number.isInteger(v)) throw new SpecError(`${field} must be an integer`);
  if (v < min || v > max) throw new SpecError(`${field} must be in ${min}..${max}`);
  return v;
}

/** A reference object: exactly `{ "resourceUid": "<id>" }`. */
export function referenceField(
  obj: Record<string, unknown>,
  field: string,
  required: boolean,
): string | undefined {
  if (!(field in obj)) {
    if (required) throw new SpecError(`${field} is required`);
    return undefined;
  }
  const ref = closedObject(obj[field], field, ['resourceUid']);
  const uid = ref.resourceUid;
  if (!('resourceUid' in ref)) throw new SpecError(`${field}.resourceUid is required`);
  if (typeof uid !== 'string' || !ID_PATTERN.test(uid))
    throw new SpecError(`${field}.resourceUid must be a Resource uid`);
  return uid;
}

export type { JsonObject };
