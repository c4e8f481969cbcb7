import { createHash } from 'node:crypto';

/**
 * Deterministic JSON text used to fingerprint requests for idempotency: object keys sorted by UTF-16 code
 * units (as RFC 8785 JCS), no whitespace, numbers in JS shortest round-trip form, strings via JSON.stringify.
 * Throws TypeError for anything that is not JSON data, so that no value is silently dropped or coerced.
 * Recursive: inputs come from parseStrictJson (depth-limited) or from our own code.
 */
export function canonicalJson(value: unknown): string {
  const out: string[] = [];
  write(value, out, new Set());
  return out.join('');
}

export function sha256Hex(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

export function fingerprint(value: unknown): string {
  return sha256Hex(canonicalJson(value));
}

const byCodeUnits = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

function write(v: unknown, out: string[], open: Set<object>): void {
  switch (typeof v) {
    case 'string':
      out.push(JSON.stringify(v)); // escapes lone surrogates, so the UTF-8 hash input is unambiguous
      return;
    case 'number':
      if (!Number.isFinite(v)) throw new TypeError('canonicalJson: non-finite number');
      out.push(String(v)); // String(-0) === '0'
      return;
    case 'boolean':
      out.push(v ? 'true' : 'false');
      return;
    case 'object':
      break;
    default:
      throw new TypeError(`canonicalJson: ${typeof v} is not JSON`);
  }
  if (v === null) {
    out.push('null');
    return;
  }
  if (open.has(v)) throw new TypeError('canonicalJson: cyclic value');
  open.add(v);
  if (Array.isArray(v)) {
    out.push('[');
    // Index loop, not forEach: holes must surface as undefined and be refused.
    for (let i = 0; i < v.length; i++) {
      if (i > 0) out.push(',');
      write(v[i], out, open);
    }
    out.push(']');
  } else {
    const proto = Object.getPrototypeOf(v);
    if (proto !== Object.prototype && proto !== null)
      throw new TypeError('canonicalJson: not a plain object');
    const obj = v as Record<string, unknown>;
    out.push('{');
    Object.keys(obj)
      .sort(byCodeUnits)
      .forEach((k, i) => {
        if (i > 0) out.push(',');
        out.push(JSON.stringify(k), ':');
        write(obj[k], out, open);
      });
    out.push('}');
  }
  open.delete(v);
}
