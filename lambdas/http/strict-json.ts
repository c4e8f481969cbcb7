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

/** The text and a position in it; each reader consumes one token and leaves `i` just past it. */
class Reader {
  readonly s: string;
  i = 0;
  constructor(s: string) {
    this.s = s;
  }

  ws(): void {
    let c = this.s.charCodeAt(this.i);
    while (c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d) c = this.s.charCodeAt(++this.i);
  }

  hex4(): number {
    let v = 0;
    for (const end = this.i + 4; this.i < end; this.i++) {
      const c = this.s.charCodeAt(this.i);
      const l = c | 0x20; // ASCII lower case; NaN (end of input) becomes 0x20 and is refused
      const d = c >= 0x30 && c <= 0x39 ? c - 0x30 : l >= 0x61 && l <= 0x66 ? l - 0x57 : fail();
      v = v * 16 + d;
    }
    return v;
  }

  escape(): string {
    const c = this.s.charCodeAt(this.i + 1);
    this.i += 2;
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
        const u = this.hex4();
        if (u < 0xd800 || u > 0xdfff) return String.fromCharCode(u);
        // Only a high surrogate escape directly followed by a low one denotes a Unicode scalar value.
        if (u >= 0xdc00 || this.s.charCodeAt(this.i) !== 0x5c || this.s.charCodeAt(this.i + 1) !== 0x75)
          fail('invalid Unicode escape');
        this.i += 2;
        const lo = this.hex4();
        if (lo < 0xdc00 || lo > 0xdfff) fail('invalid Unicode escape');
        return String.fromCharCode(u, lo);
      }
      default:
        return fail();
    }
  }

  str(): string {
    const s = this.s;
    if (s.charCodeAt(this.i) !== 0x22) fail();
    let out = '';
    let start = ++this.i;
    for (;;) {
      const c = s.charCodeAt(this.i);
      if (c === 0x22) break;
      if (c === 0x5c) {
        out += s.slice(start, this.i) + this.escape();
        start = this.i;
      } else if (c >= 0x20) this.i++;
      else fail(); // raw control character, or NaN at end of input
    }
    return out + s.slice(start, this.i++);
  }

  num(): number {
    NUMBER.lastIndex = this.i;
    if (!NUMBER.test(this.s)) fail();
    const token = this.s.slice(this.i, NUMBER.lastIndex);
    this.i = NUMBER.lastIndex;
    const n = Number(token);
    const shortest = String(n);
    // Fast path: a token spelled exactly as its shortest form is exact; otherwise compare values.
    if (token !== shortest && (!Number.isFinite(n) || decimalKey(token) !== decimalKey(shortest)))
      fail('lossy number');
    return n;
  }

  scalar(c: number): unknown {
    if (c === 0x22) return this.str();
    if (c === 0x2d || (c >= 0x30 && c <= 0x39)) return this.num();
    for (const [word, value] of LITERALS) {
      if (this.s.startsWith(word, this.i)) {
        this.i += word.length;
        return value;
      }
    }
    return fail();
  }

  /** Reads `"key" :` for the object on top of the stack, refusing a key it already holds. */
  key(obj: Record<string, unknown>): string {
    const k = this.str();
    if (Object.hasOwn(obj, k)) fail('duplicate object key');
    this.ws();
    if (this.s.charCodeAt(this.i++) !== 0x3a) fail();
    this.ws();
    return k;
  }
}

function parseText(s: string, maxDepth: number): unknown {
  const r = new Reader(s);
  const stack: Frame[] = [];
  let value: unknown;
  r.ws();
  for (;;) {
    // Start one value; a non-empty container pushes a frame and loops back for its first member.
    const c = s.charCodeAt(r.i);
    if (c === 0x5b || c === 0x7b) {
      if (stack.length >= maxDepth) fail('nesting too deep');
      r.i++;
      r.ws();
      if (c === 0x5b) {
        const arr: unknown[] = [];
        if (s.charCodeAt(r.i) !== 0x5d) {
          stack.push({ arr, obj: null, key: '' });
          continue;
        }
        value = arr;
      } else {
        const obj: Record<string, unknown> = {};
        if (s.charCodeAt(r.i) !== 0x7d) {
          stack.push({ arr: null, obj, key: r.key(obj) });
          continue;
        }
        value = obj;
      }
      r.i++;
    } else {
      value = r.scalar(c);
    }
    // Attach the finished value to its container, closing every container that ends right here.
    for (;;) {
      r.ws();
      const top = stack.at(-1);
      if (top === undefined) {
        if (r.i !== s.length) fail();
        return value;
      }
      if (top.obj === null) top.arr.push(value);
      else setMember(top.obj, top.key, value);
      const d = s.charCodeAt(r.i++);
      if (d === 0x2c) {
        r.ws();
        if (top.obj !== null) top.key = r.key(top.obj);
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
