/**
 * The Host table's key and index names: the one definition shared by the CDK construct
 * (lib/constructs/host-table.ts) and the runtime adapters, so the two cannot disagree.
 * Pure data, no imports: safe to load from CDK code and from bundled Lambda code alike.
 */
export const TABLE_KEYS = {
  pk: 'pk',
  sk: 'sk',
  gsi1: { name: 'gsi1', pk: 'gsi1pk', sk: 'gsi1sk' },
  gsi2: { name: 'gsi2', pk: 'gsi2pk', sk: 'gsi2sk' },
  /** Epoch seconds; DynamoDB TTL deletes the item some time after this instant. */
  ttl: 'expiresAt',
} as const;

/** The environment variable that carries the table name to every function bound to the table. */
export const TABLE_ENV_VAR = 'TAKOFORM_TABLE';

/**
 * A sort key in time order, as a string: 15 digits of epoch ms (the next 30 000 years), then `id`
 * for ties. Operations due (gsi2) and a consumer's closed batches (gsi1) are keyed so.
 */
export const timeOrderedKey = (at: number, id: string) =>
  `${String(Math.max(0, Math.floor(at))).padStart(15, '0')}#${id}`;
