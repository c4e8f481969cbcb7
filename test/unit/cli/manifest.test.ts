import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { UsageError } from '../../../cli/errors.ts';
import { canonical, readManifest, resolveReferences } from '../../../cli/manifest.ts';

/** `takoform apply` files (host-profile §6): shape, order, references by name, spec equality. */
const dir = mkdtempSync(path.join(os.tmpdir(), 'takoform-manifest-'));
function file(name: string, text: string): string {
  const f = path.join(dir, name);
  writeFileSync(f, text);
  return f;
}

describe('apply files', () => {
  it('orders queues, then workers, then consumers, keeping the file order within a kind', () => {
    const m = readManifest(
      file(
        'a.json',
        JSON.stringify({
          resources: [
            { kind: 'consumer', name: 'c', spec: {} },
            { kind: 'queue', name: 'q2', spec: {} },
            { kind: 'worker', name: 'w', spec: {} },
            { kind: 'queue', name: 'q1', spec: {} },
          ],
        }),
      ),
    );
    expect(m.resources.map((r) => r.name)).toEqual(['q2', 'q1', 'w', 'c']);
  });

  it('reads YAML by its name, with the same shape', () => {
    const m = readManifest(
      file('b.yaml', 'space: team\nresources:\n  - {kind: queue, name: q, spec: {a: 1}}\n'),
    );
    expect(m).toEqual({ space: 'team', resources: [{ kind: 'queue', name: 'q', spec: { a: 1 } }] });
  });

  it.each([
    ['unknown kind', { resources: [{ kind: 'table', name: 'q', spec: {} }] }],
    ['unknown field', { resources: [{ kind: 'queue', name: 'q', spec: {}, extra: 1 }] }],
    ['bad name', { resources: [{ kind: 'queue', name: 'no spaces', spec: {} }] }],
    ['no resources', { resources: [] }],
    [
      'a name twice',
      {
        resources: [
          { kind: 'queue', name: 'q', spec: {} },
          { kind: 'worker', name: 'q', spec: {} },
        ],
      },
    ],
  ])('refuses %s as a usage error', (_what, value) => {
    expect(() => readManifest(file('bad.json', JSON.stringify(value)))).toThrow(UsageError);
  });

  it('refuses duplicate YAML keys and text that is not JSON', () => {
    expect(() => readManifest(file('dup.yaml', 'resources: []\nresources: []\n'))).toThrow(UsageError);
    expect(() => readManifest(file('x.json', '{"resources": ['))).toThrow(UsageError);
  });

  it('resolves top-level {"name"} references to {"resourceUid"} and reports unknown names', () => {
    const uids = new Map([['orders', 'r1']]);
    const out = resolveReferences(
      {
        queue: { name: 'orders' },
        worker: { name: 'echo' },
        deadLetterQueue: { resourceUid: 'r9' },
        maxRetries: 3,
      },
      (n) => uids.get(n),
    );
    expect(out.spec).toEqual({
      queue: { resourceUid: 'r1' },
      worker: { resourceUid: 'echo' },
      deadLetterQueue: { resourceUid: 'r9' },
      maxRetries: 3,
    });
    expect(out.missing).toEqual(['echo']);
  });

  it('compares specs whatever their key order', () => {
    expect(canonical({ b: 1, a: { d: [1, { y: 2, x: 1 }], c: null } })).toBe(
      canonical({ a: { c: null, d: [1, { x: 1, y: 2 }] }, b: 1 }),
    );
    expect(canonical({ a: 1 })).not.toBe(canonical({ a: 2 }));
  });
});
