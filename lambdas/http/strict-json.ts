/**
 * Strict RFC 8259 parser for request bodies. It refuses what JSON.parse tolerates silently (duplicate keys,
 * numbers a double cannot hold, lone surrogates, a BOM), so two bodies that parse equal really meant the same.
 * Iterative with an explicit stack and a depth limit: linear time, no stack overflow on hostile nesting.
 */

export type StrictJsonReason =
  | 'invalid UTF-8'
  | 'byte order mark'
  | 'invalid JSON'
  | 'invalid Unicode escape'
  | 'duplicate object key'
  | 'lossy number'
  | 'nesting too deep';

/** Fixed messages only: never echo request bytes, they may hold secrets. */
export class StrictJsonError extends Error {
  override readonly name = 'StrictJsonError';
  constructor(message: StrictJsonReason) {
    super(message);
  }
}

export const DEFAULT_MAX_DEPTH = 64;

// ignoreBOM keeps a leading U+FEFF in the text so that it can be refused rather than silently stripped.
const decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
const NUMBER = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;

type Frame =
  | { arr: unknown[]; obj: null; key: string }
  | { arr: null; obj: Record<string, unknown>; key: string };

/** Parses UTF-8 JSON bytes; `-0` is returned as `-0`, exactly like JSON.parse. Throws StrictJsonError. */
export function parseStrictJson(bytes: Uint8Array, opts: { maxDepth?: number } = {}): unknown {
  let text: string;
  try {
    text = decoder.decode(bytes);
  } catch {
    throw new StrictJsonError('invalid UTF-8');
  }
  if (text.charCodeAt(0) === 0xfeff) throw new StrictJsonError('byte order mark');
  return parseText(text, opts.maxDepth ?? DEFAULT_MAX_DEPTH);
}

function fail(reason: StrictJsonReason = 'invalid JSON'): never {
  throw new StrictJsonError(reason);
}

function parseText(s: string, maxDepth: number): unknown {
  let i = 0;

  const ws = (): void => {
    let c = s.charCodeAt(i);
    while (c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d) c = s.charCodeAt(++i);
  };

  const hex4 = (): number => {
    let v = 0;
    for (const end = i + 4; i < end; i++) {
      const c = s.charCodeAt(i);
      const l = c | 0x20; // ASCII lower case; NaN (end of input) becomes 0x20 and is refused
      const d = c >= 0x30 && c <= 0x39 ? c - 0x30 : l >= 0x61 && l <= 0x66 ? l - 0x57 : fail();
      v = v * 16 + d;
    }
    return v;
  };

  const readEscape = (): string => {
    const c = s.charCodeAt(i + 1);
    i += 2;
    switch (c) {
      case 0x22:
        return '"';
      case 0x5c:
        return '\\';
      case 0x2f:
        return '/';
      case 0x62:
        return '\b';
      case 0x66:
        return '\f';
      case 0x6e:
        return '\n';
      case 0x72:
        return '\r';
      case 0x74:
        return '\t';
      case 0x75: {
        const u = hex4();
        if (u < 0xd800 || u > 0xdfff) return String.fromCharCode(u);
        // Only a high surrogate escape directly followed by a low one denotes a Unicode scalar value.
        if (u >= 0xdc00 || s.charCodeAt(i) !== 0x5c || s.charCodeAt(i + 1) !== 0x75)
          fail('invalid Unicode escape');
        i += 2;
        const lo = hex4();
        if (lo < 0xdc00 || lo > 0xdfff) fail('invalid Unicode escape');
        return String.fromCharCode(u, lo);
      }
      default:
        return fail();
    }
  };

  const str = (): string => {
    if (s.charCodeAt(i) !== 0x22) fail();
    let out = '';
    let start = ++i;
    for (;;) {
      const c = s.charCodeAt(i);
      if (c === 0x22) break;
      if (c === 0x5c) {
        out += s.slice(start, i) + readEscape();
        start = i;
      } else if (c >= 0x20) i++;
      else fail(); // raw control character, or NaN at end of input
    }
    return out + s.slice(start, i++);
  };

  const num = (): number => {
    NUMBER.lastIndex = i;
    if (!NUMBER.test(s)) fail();
    const token = s.slice(i, NUMBER.lastIndex);
    i = NUMBER.lastIndex;
    const n = Number(token);
    const shortest = String(n);
    // Fast path: a token spelled exactly as its shortest form is exact; otherwise compare values.
    if (token !== shortest && (!Number.isFinite(n) || decimalKey(token) !== decimalKey(shortest)))
      fail('lossy number');
    return n;
  };

  const scalar = (c: number): unknown => {
    if (c === 0x22) return str();
    if (c === 0x2d || (c >= 0x30 && c <= 0x39)) return num();
    for (const [word, value] of LITERALS) {
      if (s.startsWith(word, i)) {
        i += word.length;
        return value;
      }
    }
    return fail();
  };

  // Reads `"key" :` for the object on top of the stack, refusing a key it already holds.
  const key = (obj: Record<string, unknown>): string => {
    const k = str();
    if (Object.hasOwn(obj, k)) fail('duplicate object key');
    ws();
    if (s.charCodeAt(i++) !== 0x3a) fail();
    ws();
    return k;
  };

  const stack: Frame[] = [];
  let value: unknown;
  ws();
  for (;;) {
    // Start one value; a non-empty container pushes a frame and loops back for its first member.
    const c = s.charCodeAt(i);
    if (c === 0x5b || c === 0x7b) {
      if (stack.length >= maxDepth) fail('nesting too deep');
      i++;
      ws();
      if (c === 0x5b) {
        const arr: unknown[] = [];
        if (s.charCodeAt(i) !== 0x5d) {
          stack.push({ arr, obj: null, key: '' });
          continue;
        }
        value = arr;
      } else {
        const obj: Record<string, unknown> = {};
        if (s.charCodeAt(i) !== 0x7d) {
          stack.push({ arr: null, obj, key: key(obj) });
          continue;
        }
        value = obj;
      }
      i++;
    } else {
      value = scalar(c);
    }
    // Attach the finished value to its container, closing every container that ends right here.
    for (;;) {
      ws();
      const top = stack.at(-1);
      if (top === undefined) {
        if (i !== s.length) fail();
        return value;
      }
      if (top.obj === null) top.arr.push(value);
      else setMember(top.obj, top.key, value);
      const d = s.charCodeAt(i++);
      if (d === 0x2c) {
        ws();
        if (top.obj !== null) top.key = key(top.obj);
        break;
      }
      if (d !== (top.obj === null ? 0x5d : 0x7d)) fail();
      stack.pop();
      value = top.obj ?? top.arr;
    }
  }
}

const LITERALS: ReadonlyArray<readonly [string, unknown]> = [
  ['true', true],
  ['false', false],
  ['null', null],
];

function setMember(obj: Record<string, unknown>, key: string, value: unknown): void {
  // Assigning `__proto__` would swap the prototype; it must be an ordinary own data property, as in JSON.parse.
  if (key === '__proto__')
    Object.defineProperty(obj, key, { value, writable: true, enumerable: true, configurable: true });
  else obj[key] = value;
}

// Exactness criterion: a token is accepted iff its decimal value equals that of String(Number(token)), the
// double's shortest round-trip form, compared as normalized (sign, significant digits, exponent).
// Hence every accepted token maps to a distinct double: distinct decimal values never fingerprint alike.
function decimalKey(literal: string): string {
  const neg = literal.charCodeAt(0) === 0x2d;
  const e = literal.search(/[eE]/);
  const mantissa = literal.slice(neg ? 1 : 0, e < 0 ? literal.length : e);
  const dot = mantissa.indexOf('.');
  const digits = dot < 0 ? mantissa : mantissa.slice(0, dot) + mantissa.slice(dot + 1);
  const exp = (e < 0 ? 0 : Number(literal.slice(e + 1))) - (dot < 0 ? 0 : mantissa.length - dot - 1);
  let a = 0;
  let b = digits.length;
  while (a < b && digits.charCodeAt(a) === 0x30) a++;
  if (a === b) return '0'; // every zero, -0 included, is the same value
  while (digits.charCodeAt(b - 1) === 0x30) b--; // loops, not /0+$/: that regex is quadratic on long digit runs
  return `${neg ? '-' : ''}${digits.slice(a, b)}e${exp + digits.length - b}`;
}
