import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalJson, fingerprint, sha256Hex } from '../../../lambdas/engine/canonical-json.ts';
import { parseStrictJson } from '../../../lambdas/http/strict-json.ts';

const body = (text: string): unknown => parseStrictJson(new TextEncoder().encode(text));
const fp = (text: string): string => fingerprint(body(text));

describe('canonicalJson', () => {
  it.each<[unknown, string]>([
    [null, 'null'],
    [true, 'true'],
    [false, 'false'],
    [0, '0'],
    [-0, '0'],
    [1.5e-7, '1.5e-7'],
    [1e21, '1e+21'],
    [-12.25, '-12.25'],
    ['a"\\\n\u0001é😀', '"a\\"\\\\\\n\\u0001é😀"'],
    ['\ud800', '"\\ud800"'],
    [[], '[]'],
    [{}, '{}'],
    [{ b: [1, { d: 1, c: 2 }], a: 'x' }, '{"a":"x","b":[1,{"c":2,"d":1}]}'],
    [Object.assign(Object.create(null), { z: 1, y: 2 }), '{"y":2,"z":1}'],
  ])('serializes %j as %s', (value, expected) => {
    expect(canonicalJson(value)).toBe(expected);
  });

  it('sorts keys by UTF-16 code units, not by code point or locale', () => {
    // U+FF61 sorts after U+1F600 by code point but before it by UTF-16 code units (0xFF61 > 0xD83D).
    expect(canonicalJson({ '\uff61': 1, '😀': 2, B: 3, a: 4, '10': 5, '9': 6, '': 7 })).toBe(
      '{"":7,"10":5,"9":6,"B":3,"a":4,"😀":2,"｡":1}',
    );
  });

  it('keeps __proto__ as an ordinary key', () => {
    expect(canonicalJson(body('{"b":1,"__proto__":{"x":1}}'))).toBe('{"__proto__":{"x":1},"b":1}');
  });

  it.each<[string, unknown]>([
    ['undefined', undefined],
    ['undefined in an object', { a: undefined }],
    ['undefined in an array', [1, undefined]],
    ['an array hole', new Array(2)],
    ['a function', () => 1],
    ['a symbol', Symbol('s')],
    ['a bigint', 1n],
    ['NaN', Number.NaN],
    ['Infinity', Number.POSITIVE_INFINITY],
    ['-Infinity inside an array', [Number.NEGATIVE_INFINITY]],
    ['a Date', new Date(0)],
    ['a Map', new Map()],
    ['a boxed number', Object(1)],
    ['a class instance', new (class Point {})()],
  ])('throws TypeError for %s', (_name, value) => {
    expect(() => canonicalJson(value)).toThrow(TypeError);
  });

  it('throws TypeError for a cycle but accepts shared (acyclic) references', () => {
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    expect(() => canonicalJson(cyclic)).toThrow(TypeError);
    const shared = { x: 1 };
    expect(canonicalJson([shared, { s: shared }])).toBe('[{"x":1},{"s":{"x":1}}]');
  });

  it('reparses to the same canonical text (idempotent)', () => {
    fc.assert(
      fc.property(fc.oneof(fc.jsonValue(), fc.jsonValue({ stringUnit: 'binary' })), (x) => {
        const text = canonicalJson(x);
        expect(canonicalJson(JSON.parse(text))).toBe(text);
      }),
    );
  });

  it('round-trips the value it serializes', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (x) => {
        expect(JSON.parse(canonicalJson(x))).toEqual(JSON.parse(JSON.stringify(x))); // both map -0 to 0
      }),
    );
  });
});

describe('sha256Hex and fingerprint', () => {
  it('hashes the UTF-8 bytes of the text', () => {
    expect(sha256Hex('')).toBe('e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
    expect(sha256Hex('é')).toBe(
      createHash('sha256')
        .update(Buffer.from([0xc3, 0xa9]))
        .digest('hex'),
    );
  });

  it('fingerprint is sha256Hex of the canonical text', () => {
    const v = { b: [1, 2], a: null };
    expect(fingerprint(v)).toBe(sha256Hex('{"a":null,"b":[1,2]}'));
    expect(fingerprint(v)).toMatch(/^[0-9a-f]{64}$/);
  });
});

describe('HA-05: request equality by fingerprint', () => {
  it.each([
    ['key order', '{"b":1,"a":2}', '{"a":2,"b":1}'],
    ['number spelling', '{"b":1,"a":1.0e0}', '{"a":1,"b":1}'],
    ['exponent forms', '[100, 1E2, 1e+2, 100.000, 10000e-2]', '[100,100,100,100,100]'],
    ['negative zero', '{"n":-0}', '{"n":0}'],
    ['whitespace', ' { "a" : [ 1 , 2 ] } ', '{"a":[1,2]}'],
    ['string escapes', '{"k":"\\u0041\\/"}', '{"k":"A/"}'],
    ['nested key order', '{"o":{"y":{"q":1,"p":2},"x":0}}', '{"o":{"x":0,"y":{"p":2,"q":1}}}'],
  ])('treats bodies differing only in %s as equal', (_name, a, b) => {
    expect(fp(a)).toBe(fp(b));
  });

  it.each([
    ['array order', '[1,2]', '[2,1]'],
    ['omission vs null', '{"a":1}', '{"a":1,"b":null}'],
    ['null vs empty object', '{"a":null}', '{"a":{}}'],
    ['number vs string', '{"a":1}', '{"a":"1"}'],
    ['different numbers', '{"a":0.1}', '{"a":0.2}'],
    ['nested values', '{"o":{"x":[1,{"y":true}]}}', '{"o":{"x":[1,{"y":false}]}}'],
    ['key case', '{"a":1}', '{"A":1}'],
    ['array vs object', '[]', '{}'],
  ])('treats bodies differing in %s as different', (_name, a, b) => {
    expect(fp(a)).not.toBe(fp(b));
  });

  it('is insensitive to the key order of any object', () => {
    fc.assert(
      fc.property(
        fc.dictionary(fc.string({ unit: 'binary' }), fc.jsonValue()),
        fc.integer({ min: 1, max: 1_000 }),
        (dict, seed) => {
          const entries = Object.entries(dict);
          const cut = seed % (entries.length || 1);
          const reordered = [...entries.slice(cut), ...entries.slice(0, cut)].reverse();
          expect(fingerprint(Object.fromEntries(reordered))).toBe(fingerprint(dict));
        },
      ),
    );
  });
});
