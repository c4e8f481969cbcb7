/**
 * What a DynamoDB request touches, read from its JSON body (the wire format every SDK sends):
 * the items it names, their partitions in the table and in each global secondary index, and
 * the size DynamoDB bills for them. Only what the physics needs; anything it cannot tell (an
 * untouched table, a Scan, a PartiQL statement) touches nothing.
 */

/** An attribute value as on the wire: `{"S":"x"}`, `{"N":"1"}`, `{"M":{…}}`, … */
export type Av = Record<string, unknown>;
export type WireItem = Record<string, Av>;

export interface IndexSchema {
  name: string;
  pk: string;
  sk?: string;
}
export interface TableSchema {
  table: string;
  pk: string;
  sk?: string;
  indexes: IndexSchema[];
}

/** How an attribute value reads in a report: its string or number, else its JSON. */
export function avText(av: Av | undefined): string {
  if (!av) return '∅';
  if (typeof av.S === 'string') return av.S;
  if (typeof av.N === 'string') return av.N;
  return JSON.stringify(av);
}

const utf8 = (s: string) => Buffer.byteLength(s, 'utf8');

/** The bytes DynamoDB counts for a value (names are counted by `itemBytes`). */
export function avBytes(av: Av): number {
  if (typeof av.S === 'string') return utf8(av.S);
  if (typeof av.N === 'string') return Math.ceil(av.N.replace(/[-.]/g, '').length / 2) + 1;
  if (typeof av.B === 'string') return Math.floor((av.B.length * 3) / 4);
  if (av.BOOL !== undefined || av.NULL !== undefined) return 1;
  if (Array.isArray(av.SS)) return (av.SS as string[]).reduce((n, s) => n + utf8(s), 0);
  if (Array.isArray(av.NS)) return (av.NS as string[]).reduce((n, s) => n + avBytes({ N: s }), 0);
  if (Array.isArray(av.BS)) return (av.BS as string[]).reduce((n, s) => n + avBytes({ B: s }), 0);
  if (Array.isArray(av.L)) return 3 + (av.L as Av[]).reduce((n, v) => n + 1 + avBytes(v), 0);
  if (av.M && typeof av.M === 'object') return 3 + itemBytes(av.M as WireItem);
  return 1;
}

export function itemBytes(item: WireItem): number {
  let n = 0;
  for (const [name, av] of Object.entries(item)) n += utf8(name) + avBytes(av);
  return n;
}

/** An item of a table: its identity, its name in reports and its partition in the table. */
export interface ItemRef {
  id: string;
  name: string;
  partition: string;
}

export function itemRef(schema: TableSchema, keyOrItem: WireItem, by: 'key' | 'item'): ItemRef {
  const pk = avText(keyOrItem[schema.pk]);
  const name = schema.sk ? `${pk} / ${avText(keyOrItem[schema.sk])}` : pk;
  return {
    id: `${schema.table}\u0000${name}`,
    name: `${schema.table}:${name}`,
    partition: `${schema.table}:${by === 'key' ? pk : name}`,
  };
}

export const indexPartition = (schema: TableSchema, index: string, pk: Av) =>
  `${schema.table}/${index}:${avText(pk)}`;

/** The partitions of the indexes `item` appears in (an index holds the items that carry its key). */
export function indexPartitionsOf(schema: TableSchema, item: WireItem): string[] {
  const out: string[] = [];
  for (const ix of schema.indexes) {
    const v = item[ix.pk];
    if (v && (!ix.sk || item[ix.sk])) out.push(indexPartition(schema, ix.name, v));
  }
  return out;
}

/** The value an expression sets `attribute` to (`#a = :v` or `attribute = :v`), when it says so plainly. */
export function assignedValue(
  expression: string | undefined,
  attribute: string,
  names: Record<string, string> | undefined,
  values: WireItem | undefined,
): Av | undefined {
  if (!expression || !values) return undefined;
  const tokens = [
    attribute,
    ...Object.entries(names ?? {})
      .filter(([, v]) => v === attribute)
      .map(([k]) => k),
  ];
  for (const token of tokens) {
    const escaped = token.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    const m = new RegExp(`(?:^|[\\s,(])${escaped}\\s*=\\s*(:[A-Za-z0-9_]+)`).exec(expression);
    if (m?.[1] && values[m[1]]) return values[m[1]];
  }
  return undefined;
}

/** The partition a Query reads: its key condition's partition key value, in the table or the index. */
export function queryPartition(
  schema: TableSchema,
  body: Record<string, unknown>,
  by: 'key' | 'item',
): string | undefined {
  const index =
    typeof body.IndexName === 'string' ? schema.indexes.find((i) => i.name === body.IndexName) : undefined;
  const pkName = index ? index.pk : schema.pk;
  const v = assignedValue(
    body.KeyConditionExpression as string | undefined,
    pkName,
    body.ExpressionAttributeNames as Record<string, string> | undefined,
    body.ExpressionAttributeValues as WireItem | undefined,
  );
  if (!v) return undefined;
  if (index) return indexPartition(schema, index.name, v);
  // A Query spans items, so it reads the key's partition even when budgets are per item.
  return `${schema.table}:${avText(v)}${by === 'item' ? ' / *' : ''}`;
}

/** Write units for `bytes` (1 KB each, at least one). */
export const writeUnits = (bytes: number) => Math.max(1, Math.ceil(bytes / 1024));
/** Read units for `bytes` (4 KB each, at least one; half for an eventually consistent read). */
export const readUnits = (bytes: number, consistent: boolean) =>
  Math.max(1, Math.ceil(bytes / 4096)) * (consistent ? 1 : 0.5);

/**
 * What the physics remembers of an item it saw (written or read): its size and the index
 * partitions it is in, so an update or delete is billed for the larger of the item before and
 * after, and charges the indexes the old item was in. Bounded: the oldest entries go first.
 */
export class ItemMemory {
  private readonly items = new Map<string, { bytes: number; indexes: string[] }>();
  private readonly max: number;
  constructor(max = 100_000) {
    this.max = max;
  }

  get(id: string) {
    return this.items.get(id);
  }
  set(id: string, bytes: number, indexes: string[]): void {
    this.items.delete(id);
    this.items.set(id, { bytes, indexes });
    if (this.items.size > this.max) {
      const oldest = this.items.keys().next().value;
      if (oldest !== undefined) this.items.delete(oldest);
    }
  }
  forget(id: string): void {
    this.items.delete(id);
  }
}
