/**
 * The layout rules of ARCHITECTURE.md, read from the source itself:
 * - the core (engine/, forms/, delivery/) knows ports only: it imports no AWS SDK and nothing from
 *   adapters/, composition/, entries/, local/, http/ or worker-runtime/;
 * - the Lambda entries (entries/) reach adapters only through the composition root;
 * - no source file outside test/ is over 600 lines.
 * Imports are read with a small scanner rather than a dependency graph tool: the rules need only
 * each file's import specifiers, and the tools that build graphs lean on the TypeScript compiler's
 * JavaScript API, which the native TypeScript compiler this project uses no longer offers.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const CORE = ['lambdas/engine/', 'lambdas/forms/', 'lambdas/delivery/'];
const OUTSIDE_CORE = [
  'lambdas/adapters/',
  'lambdas/composition/',
  'lambdas/entries/',
  'lambdas/local/',
  'lambdas/http/',
  'lambdas/worker-runtime/',
];

/** Every module specifier of a file: static and dynamic imports, re-exports, `vi.mock`. */
function specifiersOf(source: string): string[] {
  const out: string[] = [];
  const patterns = [
    /\bimport\s+(?:type\s+)?(?:[\w*{}\s,]+\s+from\s+)?['"]([^'"]+)['"]/g,
    /\bexport\s+(?:type\s+)?(?:\*|\{[^}]*\})\s+from\s+['"]([^'"]+)['"]/g,
    /\bimport\(\s*['"]([^'"]+)['"]\s*\)/g,
  ];
  for (const pattern of patterns) for (const m of source.matchAll(pattern)) out.push(m[1] as string);
  return out;
}

/** A specifier as the rules see it: a repository path for a relative one, else the package name. */
function targetOf(file: string, specifier: string): string {
  if (!specifier.startsWith('.')) return specifier;
  return relative(ROOT, resolve(dirname(join(ROOT, file)), specifier));
}

/** The imports of `files` that break the core rule, as `file -> target`. */
function coreViolations(files: { path: string; source: string }[]): string[] {
  const broken: string[] = [];
  for (const { path, source } of files) {
    if (!CORE.some((c) => path.startsWith(c))) continue;
    for (const spec of specifiersOf(source)) {
      const target = targetOf(path, spec);
      if (target.startsWith('@aws-sdk/') || OUTSIDE_CORE.some((o) => target.startsWith(o))) {
        broken.push(`${path} -> ${target}`);
      }
    }
  }
  return broken;
}

const tracked = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard'], {
  cwd: ROOT,
  encoding: 'utf8',
})
  .split('\n')
  .filter((f) => f !== '');
const sources = tracked.filter((f) => /\.(ts|mts|mjs|js)$/.test(f) && !f.endsWith('.d.ts'));
const read = (path: string) => ({ path, source: readFileSync(join(ROOT, path), 'utf8') });

describe('architecture rules', () => {
  it('the core imports no AWS SDK and nothing of adapters, composition, entries, local, http or worker runtime', () => {
    expect(coreViolations(sources.map(read))).toEqual([]);
  });

  it('the rule catches a core file that imports an adapter or the AWS SDK (the check can fail)', () => {
    const planted = [
      {
        path: 'lambdas/delivery/planted.ts',
        source: "import { isMissingQueue } from '../adapters/aws/sqs-queue-backend.ts';\n",
      },
      {
        path: 'lambdas/engine/planted.ts',
        source: "import type { SQSClient } from '@aws-sdk/client-sqs';\n",
      },
      { path: 'lambdas/forms/x/planted.ts', source: "export { a } from '../../local/faults/crash-at.ts';\n" },
      { path: 'lambdas/adapters/aws/fine.ts', source: "import { x } from '@aws-sdk/client-sqs';\n" },
    ];
    expect(coreViolations(planted)).toEqual([
      'lambdas/delivery/planted.ts -> lambdas/adapters/aws/sqs-queue-backend.ts',
      'lambdas/engine/planted.ts -> @aws-sdk/client-sqs',
      'lambdas/forms/x/planted.ts -> lambdas/local/faults/crash-at.ts',
    ]);
  });

  it('Lambda entries reach adapters and the SDK only through the composition root', () => {
    const broken = sources
      .filter((f) => f.startsWith('lambdas/entries/'))
      .map(read)
      .flatMap(({ path, source }) =>
        specifiersOf(source)
          .map((s) => targetOf(path, s))
          .filter((t) => t.startsWith('lambdas/adapters/') && !t.endsWith('/call-recorder.ts'))
          .map((t) => `${path} -> ${t}`),
      );
    expect(broken).toEqual([]);
  });

  it('no source file outside test/ is over 600 lines', () => {
    const long = sources
      .filter((f) => !f.startsWith('test/'))
      .map((f) => ({ f, lines: readFileSync(join(ROOT, f), 'utf8').split('\n').length - 1 }))
      .filter((x) => x.lines > 600)
      .map((x) => `${x.f}: ${x.lines}`);
    expect(long).toEqual([]);
  });
});
