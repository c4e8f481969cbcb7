import { readFileSync, statSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { ID_PATTERN } from '../lambdas/engine/ids.ts';
import { UsageError, whyUnreadable } from './errors.ts';
import { KIND_NAMES, type Kind } from './kinds.ts';

/** An apply file larger than this is refused before it is read. */
const MAX_FILE_BYTES = 1024 * 1024;

const entrySchema = z.strictObject({
  kind: z.enum(KIND_NAMES as [Kind, ...Kind[]]),
  name: z.string().regex(ID_PATTERN),
  spec: z.record(z.string(), z.unknown()),
});
const manifestSchema = z.strictObject({
  space: z.string().regex(ID_PATTERN).optional(),
  resources: z.array(entrySchema).min(1).max(200),
});

export type ManifestEntry = z.infer<typeof entrySchema>;
export type Manifest = z.infer<typeof manifestSchema>;

/** Dependency order: what a consumer references (queues, workers) exists before it. */
const ORDER: Record<Kind, number> = { queue: 0, worker: 1, consumer: 2 };

function parseText(text: string, file: string): unknown {
  if (/\.ya?ml$/i.test(file)) {
    try {
      return parseYaml(text, { uniqueKeys: true, maxAliasCount: 50 });
    } catch (err) {
      throw new UsageError(`${file} is not valid YAML (${(err as Error).message.split('\n')[0]})`);
    }
  }
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new UsageError(`${file} is not valid JSON (${(err as Error).message})`);
  }
}

/** Reads, validates and orders an apply file (JSON, or YAML by its `.yaml`/`.yml` name). */
export function readManifest(file: string): Manifest {
  let text: string;
  try {
    if (statSync(file).size > MAX_FILE_BYTES) throw new UsageError(`${file} is over ${MAX_FILE_BYTES} bytes`);
    text = readFileSync(file, 'utf8');
  } catch (err) {
    if (err instanceof UsageError) throw err;
    throw new UsageError(`cannot read ${file}: ${whyUnreadable(err)}`);
  }
  const parsed = manifestSchema.safeParse(parseText(text, file));
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue?.path.length ? issue.path.join('.') : '(top level)';
    throw new UsageError(`${file}: ${where}: ${issue?.message ?? 'invalid'}`);
  }
  const seen = new Set<string>();
  for (const r of parsed.data.resources) {
    if (seen.has(r.name))
      throw new UsageError(`${file}: the name ${r.name} is used twice (names are unique in a Space)`);
    seen.add(r.name);
  }
  const resources = parsed.data.resources
    .map((r, i) => ({ r, i }))
    .sort((a, b) => ORDER[a.r.kind] - ORDER[b.r.kind] || a.i - b.i)
    .map(({ r }) => r);
  return { ...parsed.data, resources };
}

/** `{"name":"orders"}` as a spec field: a reference by name, resolved before the request. */
function referenceName(value: unknown): string | undefined {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  const keys = Object.keys(value);
  const name = (value as { name?: unknown }).name;
  return keys.length === 1 && typeof name === 'string' ? name : undefined;
}

/**
 * The spec with every top-level reference by name replaced by `{"resourceUid":…}`; `uidOf`
 * answers undefined for a name that is neither in the file nor in the Space.
 */
export function resolveReferences(
  spec: Record<string, unknown>,
  uidOf: (name: string) => string | undefined,
): { spec: Record<string, unknown>; missing: string[] } {
  const out: Record<string, unknown> = {};
  const missing: string[] = [];
  for (const [field, value] of Object.entries(spec)) {
    const name = referenceName(value);
    if (name === undefined) {
      out[field] = value;
      continue;
    }
    const uid = uidOf(name);
    if (uid === undefined) missing.push(name);
    out[field] = { resourceUid: uid ?? name };
  }
  return { spec: out, missing };
}

/** JSON with sorted keys: two specs are the same when these are equal. */
export function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>).sort(([a], [b]) =>
      a < b ? -1 : a > b ? 1 : 0,
    );
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}
