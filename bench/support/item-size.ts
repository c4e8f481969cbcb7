/**
 * DynamoDB item sizes as AWS counts them for billing: attribute names and values in UTF-8 bytes,
 * numbers by their significant digits, 3 bytes per list or map plus 1 per element. The meter uses
 * them where DynamoDB Local's reported units differ from AWS's (multi-item transactions).
 */
import type { AttributeValue } from '@aws-sdk/client-dynamodb';

const utf8 = (s: string) => Buffer.byteLength(s, 'utf8');

/** A number's size: about one byte per two significant digits, plus one. */
function numberSize(n: string): number {
  const digits = n
    .replace(/^-/, '')
    .replace(/e.*$/i, '')
    .replace('.', '')
    .replace(/^0+/, '')
    .replace(/0+$/, '');
  return Math.ceil(Math.max(1, digits.length) / 2) + 1;
}

export function attributeValueSize(v: AttributeValue | undefined): number {
  if (!v) return 0;
  if (v.S !== undefined) return utf8(v.S);
  if (v.N !== undefined) return numberSize(v.N);
  if (v.B !== undefined) return v.B.byteLength;
  if (v.BOOL !== undefined || v.NULL !== undefined) return 1;
  if (v.SS) return v.SS.reduce((n, s) => n + utf8(s), 0);
  if (v.NS) return v.NS.reduce((n, s) => n + numberSize(s), 0);
  if (v.BS) return v.BS.reduce((n, b) => n + b.byteLength, 0);
  if (v.L) return 3 + v.L.reduce((n, e) => n + 1 + attributeValueSize(e), 0);
  if (v.M) return 3 + Object.entries(v.M).reduce((n, [k, e]) => n + 1 + utf8(k) + attributeValueSize(e), 0);
  return 0;
}

export function itemSize(item: Record<string, AttributeValue> | undefined): number {
  if (!item) return 0;
  return Object.entries(item).reduce((n, [name, v]) => n + utf8(name) + attributeValueSize(v), 0);
}

/**
 * An upper bound of how much an update expression can add to an item: the names and values it
 * writes (`SET`/`ADD` paths and operands). A name or value used only by the condition adds nothing.
 */
export function updateGrowth(input: {
  UpdateExpression?: string;
  ExpressionAttributeNames?: Record<string, string>;
  ExpressionAttributeValues?: Record<string, AttributeValue>;
}): number {
  // The SET and ADD clauses, wherever they stand among REMOVE and DELETE.
  const clauses = (input.UpdateExpression ?? '').split(/\b(?=(?:SET|REMOVE|ADD|DELETE)\s)/i);
  const written = clauses.filter((c) => /^(SET|ADD)\s/i.test(c.trim())).join(' ');
  const used = (token: string) => new RegExp(`${token}(?![A-Za-z0-9_])`).test(written);
  let growth = 0;
  for (const [token, name] of Object.entries(input.ExpressionAttributeNames ?? {})) {
    if (used(token)) growth += utf8(name) + 1;
  }
  for (const [token, v] of Object.entries(input.ExpressionAttributeValues ?? {})) {
    if (used(token)) growth += attributeValueSize(v);
  }
  return growth;
}

/** Write units of one item in a transaction: 2 per started KB, as AWS bills them. */
export const transactionalUnits = (bytes: number) => 2 * Math.max(1, Math.ceil(bytes / 1024));
