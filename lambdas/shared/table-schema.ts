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
