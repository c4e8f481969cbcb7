import { isDeepStrictEqual } from 'node:util';
import { runInNewContext } from 'node:vm';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  parseStrictJson,
  StrictJsonError,
  type StrictJsonReason,
} from '../../../lambdas/http/strict-json.ts';

const utf8 = (text: string): Uint8Array => new TextEncoder().encode(text);
const parse = (text: string, maxDepth?: number): unknown => parseStrictJson(utf8(text), { maxDepth });

function reasonOf(run: () => unknown): StrictJsonReason | 'accepted' {
  try {
    run();
    return 'accepted';
  } catch (err) {
    if (!(err instanceof StrictJsonError)) throw err;
    return err.message as StrictJsonReason;
  }
}

const refusedAs = (reason: StrictJsonReason, texts: string[]) => texts.map((text) => [text, reason] as const);

describe('parseStrictJson: accepted documents', () => {
  it.each<[string, unknown]>([
    ['0', 0],
    ['-0.125', -0.125],
    ['true', true],
    ['false', false],
    ['null', null],
    ['"x"', 'x'],
    ['[]', []],
    ['{}', {}],
    [' \t\r\n[ 1 , "a" , { "b" : null } ]\n', [1, 'a', { b: null }]],
    ['{"a":{"a":1},"b":[{"a":1},{"a":2}]}', { a: { a: 1 }, b: [{ a: 1 }, { a: 2 }] }],
    ['{"a":1,"A":2}', { a: 1, A: 2 }],
    ['"\\"\\\\\\/\\b\\f\\n\\r\\t"', '"\\/\b\f\n\r\t'],
    ['"\\u0041\\u00e9\\u20AC"', 'Aé€'],
    ['"\\ud83d\\ude00"', '😀'],
    ['"\\uDBFF\\uDFFF"', '\u{10FFFF}'],
    ['"😀 é \u007f \u2028"', '😀 é \u007f \u2028'],
    ['"\\u0000"', '\u0000'],
  ])('accepts %j', (text, expected) => {
    expect(parse(text)).toEqual(expected);
  });
});

describe('parseStrictJson: RFC 8259 grammar', () => {
  it.each(
    refusedAs('invalid JSON', [
      '',
      ' ',
      '01',
      '-01',
      '00',
      '1.',
      '.5',
      '+1',
      '-',
      '1e',
      '1e+',
      '1.e3',
      '0x10',
      'NaN',
      'Infinity',
      '-Infinity',
      '[1,]',
      '{"a":1,}',
      '[,1]',
      '[1 2]',
      '{"a" 1}',
      '{"a":}',
      '{a:1}',
      "{'a':1}",
      "'a'",
      '{"a":1 "b":2}',
      '[1]]',
      '[',
      ']',
      '{',
      '{"a":1',
      '"abc',
      '"\\',
      '1 2',
      '"a"x',
      'tru',
      'nul',
      'True',
      'truex',
      '// c\n1',
      '/* c */ 1',
      '1 /* c */',
      '# c\n1',
      '\f1',
      '\v1',
      '\u00a01',
      '\u20281',
      '1\u0000',
      '"\t"',
      '"a\nb"',
      '"\u0000"',
      '"\u001f"',
      '"\\x41"',
      '"\\a"',
      '"\\\'"',
      '"\\u12"',
      '"\\u12G4"',
      '"\\U0041"',
      '{"a":1}{"b":2}',
    ]),
  )('refuses %j as %s', (text, reason) => {
    expect(reasonOf(() => parse(text))).toBe(reason);
  });
});

describe('parseStrictJson: encoding', () => {
  it.each<[string, number[], StrictJsonReason]>([
    ['a leading BOM', [0xef, 0xbb, 0xbf, 0x31], 'byte order mark'],
    ['a BOM before an object', [0xef, 0xbb, 0xbf, 0x7b, 0x7d], 'byte order mark'],
    ['a lone continuation byte', [0x22, 0x80, 0x22], 'invalid UTF-8'],
    ['an overlong encoding', [0x22, 0xc0, 0xaf, 0x22], 'invalid UTF-8'],
    ['a truncated sequence', [0x22, 0xe2, 0x82, 0x22], 'invalid UTF-8'],
    ['an encoded surrogate', [0x22, 0xed, 0xa0, 0x80, 0x22], 'invalid UTF-8'],
    ['a code point above U+10FFFF', [0x22, 0xf4, 0x90, 0x80, 0x80, 0x22], 'invalid UTF-8'],
    ['the byte 0xFF', [0xff], 'invalid UTF-8'],
  ])('refuses %s', (_name, bytes, reason) => {
    expect(reasonOf(() => parseStrictJson(Uint8Array.from(bytes)))).toBe(reason);
  });

  it('refuses a BOM after leading whitespace as invalid JSON (it is not whitespace)', () => {
    expect(reasonOf(() => parse(' \uFEFF1'))).toBe('invalid JSON');
  });

  it.each(
    refusedAs('invalid Unicode escape', [
      '"\\ud800"',
      '"\\uDBFF"',
      '"\\udc00"',
      '"\\uDFFF"',
      '"\\ud800x"',
      '"\\ud800\\u0041"',
      '"\\ud800\\ud800"',
      '"\\udc00\\ud800"',
      '"\\ud800\\n"',
      '{"\\ud800":1}',
    ]),
  )('refuses the lone surrogate escape in %j', (text, reason) => {
    expect(reasonOf(() => parse(text))).toBe(reason);
  });
});

describe('parseStrictJson: duplicate keys', () => {
  it.each(
    refusedAs('duplicate object key', [
      '{"a":1,"a":2}',
      '{"a":null,"a":null}',
      '{"a":1,"\\u0061":2}',
      '{"a":1,"b":2,"a":3}',
      '{"":1,"":2}',
      '{"😀":1,"\\ud83d\\ude00":2}',
      '{"a\\/b":1,"a/b":2}',
      '{"__proto__":1,"__proto__":2}',
      '{"constructor":1,"constructor":2}',
      '[{"x":{"a":1,"a":1}}]',
      '{"x":[0,{"y":{"k":[],"k":{}}}]}',
    ]),
  )('HA-13: refuses %j', (text, reason) => {
    expect(reasonOf(() => parse(text))).toBe(reason);
  });
});

describe('parseStrictJson: numbers', () => {
  it.each<[string, number]>([
    ['0', 0],
    ['1.0e0', 1],
    ['-0.125', -0.125],
    ['10.0', 10],
    ['1E2', 100],
    ['1e+2', 100],
    ['100e-2', 1],
    ['0.1', 0.1],
    ['0.00001', 0.00001],
    ['123.456E-3', 0.123456],
    ['9007199254740992', 2 ** 53],
    ['-9007199254740992', -(2 ** 53)],
    ['1e21', 1e21],
    ['1.7976931348623157e308', Number.MAX_VALUE],
    ['5e-324', Number.MIN_VALUE],
    ['2.2250738585072014E-308', 2.2250738585072014e-308],
    ['0e400', 0],
    ['0.000e-400', 0],
  ])('accepts the exact number %s', (text, expected) => {
    expect(parse(text)).toBe(expected);
  });

  it('returns -0 for "-0" tokens, exactly like JSON.parse', () => {
    expect(Object.is(parse('-0'), -0)).toBe(true);
    expect(Object.is(parse('-0.0e5'), -0)).toBe(true);
  });

  it.each(
    refusedAs('lossy number', [
      '9007199254740993',
      '-9007199254740993',
      '0.10000000000000001',
      '0.30000000000000004441',
      '1e400',
      '-1e400',
      '1e-400',
      '-1e-400',
      '4e-324',
      '1.79769313486231581e308',
      '123456789012345678901234567890',
      // Exactly representable, but not its double's shortest form: refused by the documented criterion.
      '18446744073709551616',
      '0.1000000000000000055511151231257827021181583404541015625',
      '[1,2,9007199254740993]',
      '{"n":1e400}',
    ]),
  )('HA-13: refuses %s', (text, reason) => {
    expect(reasonOf(() => parse(text))).toBe(reason);
  });
});

describe('parseStrictJson: depth limit', () => {
  const arrays = (n: number) => `${'['.repeat(n)}${']'.repeat(n)}`;
  const objects = (n: number) => `${'{"a":'.repeat(n)}1${'}'.repeat(n)}`;

  it('accepts 64 nested containers by default and refuses 65', () => {
    expect(reasonOf(() => parse(arrays(64)))).toBe('accepted');
    expect(reasonOf(() => parse(objects(64)))).toBe('accepted');
    expect(reasonOf(() => parse(arrays(65)))).toBe('nesting too deep');
    expect(reasonOf(() => parse(objects(65)))).toBe('nesting too deep');
    // Depth is nesting, not a count of containers: siblings do not add up.
    expect(reasonOf(() => parse(`[${objects(63)},${arrays(63)},${objects(63)}]`))).toBe('accepted');
    expect(reasonOf(() => parse(`[${objects(3)},${arrays(64)}]`))).toBe('nesting too deep');
  });

  it('honours maxDepth', () => {
    expect(parse('[[1]]', 2)).toEqual([[1]]);
    expect(reasonOf(() => parse('[[[]]]', 2))).toBe('nesting too deep');
    expect(reasonOf(() => parse('[{}]', 1))).toBe('nesting too deep');
    expect(parse('"scalar"', 0)).toBe('scalar');
    expect(reasonOf(() => parse('[]', 0))).toBe('nesting too deep');
  });

  it('refuses hostile nesting without overflowing the stack', () => {
    expect(reasonOf(() => parse('['.repeat(1_000_000)))).toBe('nesting too deep');
    expect(reasonOf(() => parse(arrays(100_000), 1_000_000))).toBe('accepted');
  });
});

describe('parseStrictJson: __proto__ and result shape', () => {
  it('stores __proto__ as an own data property and never changes the prototype', () => {
    const v = parse('{"__proto__":{"polluted":true},"b":1}') as Record<string, unknown>;
    expect(Object.getPrototypeOf(v)).toBe(Object.prototype);
    expect(Object.hasOwn(v, '__proto__')).toBe(true);
    expect(Object.keys(v)).toEqual(['__proto__', 'b']);
    expect(v.polluted).toBeUndefined();
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(v).toEqual(JSON.parse('{"__proto__":{"polluted":true},"b":1}'));
  });

  it('returns ordinary objects and arrays', () => {
    const v = parse('{"a":[{}]}') as { a: object[] };
    expect(Object.getPrototypeOf(v)).toBe(Object.prototype);
    expect(Array.isArray(v.a)).toBe(true);
    expect(Object.getPrototypeOf(v.a[0])).toBe(Object.prototype);
  });
});

describe('StrictJsonError', () => {
  it('is an Error with a fixed name and a message that never echoes the input', () => {
    let caught: unknown;
    try {
      parse('{"password":"hunter2","password":"hunter2"}');
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(StrictJsonError);
    expect(caught).toBeInstanceOf(Error);
    const err = caught as StrictJsonError;
    expect(err.name).toBe('StrictJsonError');
    expect(err.message).toBe('duplicate object key');
    expect(String(err)).not.toContain('hunter2');
  });
});

describe('parseStrictJson: linear time', () => {
  it('handles large inputs quickly', () => {
    const wide = `{${Array.from({ length: 100_000 }, (_, i) => `"k${i}":${i}`).join(',')}}`;
    const escapes = `"${'\\u0041\\n'.repeat(200_000)}"`;
    const digits = `1${'0'.repeat(200_000)}1e-200000`;
    const zeros = `0.${'0'.repeat(200_000)}`;
    const started = performance.now();
    expect(Object.keys(parse(wide) as object)).toHaveLength(100_000);
    expect(parse(escapes)).toBe('A\n'.repeat(200_000));
    expect(reasonOf(() => parse(digits))).toBe('lossy number');
    expect(parse(zeros)).toBe(0);
    expect(performance.now() - started).toBeLessThan(5_000); // generous: only catches quadratic behaviour
  });
});

describe('parseStrictJson: properties', () => {
  // jsonValue already avoids NaN/±Infinity; the filter states the restriction rather than trusting it.
  const finiteOnly = (v: unknown): boolean =>
    typeof v === 'number'
      ? Number.isFinite(v)
      : typeof v !== 'object' || v === null || Object.values(v).every(finiteOnly);
  const finiteJson = fc.oneof(fc.jsonValue(), fc.jsonValue({ stringUnit: 'binary' })).filter(finiteOnly);

  it('agrees with JSON.parse on every JSON.stringify output', () => {
    fc.assert(
      fc.property(finiteJson, (v) => {
        const text = JSON.stringify(v);
        expect(parse(text)).toEqual(JSON.parse(text));
      }),
    );
  });

  it('agrees with JSON.parse on pretty-printed output', () => {
    fc.assert(
      fc.property(finiteJson, (v) => {
        const text = JSON.stringify(v, null, '\t');
        expect(parse(`\r\n${text}\n`)).toEqual(JSON.parse(text));
      }),
    );
  });

  it('throws nothing but StrictJsonError on random bytes', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), (bytes) => {
        reasonOf(() => parseStrictJson(bytes));
      }),
      { numRuns: 2_000 },
    );
  });

  it('throws nothing but StrictJsonError on mutated JSON, and whatever it accepts JSON.parse reads alike', () => {
    const mutated = fc
      .tuple(
        fc.jsonValue(),
        fc.nat(),
        fc.nat({ max: 3 }),
        fc.constantFrom(...'{}[],:"\\-+.0123456789eEtfnu \t\n/\u0000\uFEFF\ud800'),
      )
      .map(([v, at, cut, ch]) => {
        const text = JSON.stringify(v);
        const p = text.length === 0 ? 0 : at % text.length;
        return text.slice(0, p) + ch + text.slice(p + cut);
      });
    fc.assert(
      fc.property(mutated, (text) => {
        const bytes = utf8(text); // a raw lone surrogate encodes as U+FFFD, so compare with the decoded bytes
        if (reasonOf(() => parseStrictJson(bytes)) === 'accepted') {
          const got = parseStrictJson(bytes);
          const decoded = new TextDecoder().decode(bytes);
          const viaJsonParse = JSON.parse(decoded);
          if (isDeepStrictEqual(got, viaJsonParse)) return;
          // V8's JSON.parse (Node 24.21) was seen to return a wrong key for an escaped one after
          // thousands of parses (fast-check seed 1425812530: `"\""` read as a backslash), while a
          // fresh process reads it right: then the JavaScript parser is the second witness.
          expect(got).toEqual(runInNewContext(`(${decoded})`));
        }
      }),
      { numRuns: 2_000 },
    );
  });

  const double = fc.double({ noNaN: true, noDefaultInfinity: true });
  // d.toExponential() is the shortest round-trip form "m[.mmm]e±x"; pad its mantissa with `tail`.
  const padded = (d: number, tail: string): string => {
    const [m = '', e = ''] = d.toExponential().split('e');
    return `${m}${tail === '' || m.includes('.') ? '' : '.'}${tail}e${e}`;
  };

  it('accepts every double in shortest form and with its mantissa zero-padded', () => {
    fc.assert(
      fc.property(double, fc.nat({ max: 30 }), (d, k) => {
        const expected = d === 0 ? 0 : d; // -0 prints as "0"
        expect(parse(String(d))).toBe(expected);
        expect(parse(padded(d, '0'.repeat(k)))).toBe(expected);
      }),
    );
  });

  it('HA-13: refuses a double with any extra non-zero digit beyond 17 significant digits', () => {
    // No double's shortest form has more than 17 significant digits, so such a token is never exact.
    fc.assert(
      fc.property(double, fc.integer({ min: 17, max: 40 }), fc.integer({ min: 1, max: 9 }), (d, k, last) => {
        fc.pre(d !== 0);
        expect(reasonOf(() => parse(padded(d, `${'0'.repeat(k)}${last}`)))).toBe('lossy number');
      }),
    );
  });

  it('HA-13: accepts integers up to 2^53 and refuses odd integers beyond it', () => {
    const limit = 2n ** 53n;
    fc.assert(
      fc.property(fc.bigInt({ min: -limit, max: limit }), (b) => {
        expect(parse(b.toString())).toBe(Number(b));
      }),
    );
    fc.assert(
      fc.property(fc.bigInt({ min: limit + 1n, max: 2n ** 80n }), fc.boolean(), (b, neg) => {
        const odd = b | 1n; // an odd integer above 2^53 has no double
        expect(reasonOf(() => parse((neg ? -odd : odd).toString()))).toBe('lossy number');
      }),
    );
  });

  it('HA-13: refuses any object with an injected duplicate key, at any depth and however escaped', () => {
    // Every UTF-16 code unit as a \uXXXX escape: the duplicate only shows once keys are unescaped.
    const escapeAll = (key: string) =>
      `"${Array.from({ length: key.length }, (_, i) => `\\u${key.charCodeAt(i).toString(16).padStart(4, '0')}`).join('')}"`;
    const doc = fc
      .record({
        entries: fc.uniqueArray(fc.tuple(fc.string({ unit: 'binary' }), fc.jsonValue()), {
          selector: ([k]) => k,
          minLength: 1,
        }),
        pick: fc.nat(),
        insertAt: fc.nat(),
        dupValue: fc.jsonValue(),
        escaped: fc.boolean(),
        wrap: fc.array(fc.constantFrom('array', 'object'), { maxLength: 5 }),
      })
      .map(({ entries, pick, insertAt, dupValue, escaped, wrap }) => {
        const [key] = entries[pick % entries.length]!;
        const members = entries.map(([k, v]) => `${JSON.stringify(k)}:${JSON.stringify(v)}`);
        const dup = `${escaped ? escapeAll(key) : JSON.stringify(key)}:${JSON.stringify(dupValue)}`;
        members.splice(insertAt % (members.length + 1), 0, dup);
        return wrap.reduce(
          (inner, kind) => (kind === 'array' ? `[0,${inner}]` : `{"w":${inner}}`),
          `{${members.join(',')}}`,
        );
      });
    fc.assert(
      fc.property(doc, (text) => {
        expect(reasonOf(() => parse(text))).toBe('duplicate object key');
      }),
    );
  });
});
