import type { Context } from './context.ts';
import { RefusedError, UsageError } from './errors.ts';
import { API_ROOT, type Operation } from './host-client.ts';
import { KINDS, kindOf } from './kinds.ts';
import { canonical, type ManifestEntry, readManifest, resolveReferences } from './manifest.ts';

export type ApplyResult = 'created' | 'updated' | 'unchanged';

export interface ApplyOptions {
  file: string;
  timeoutMs: number;
}

/**
 * `apply -f FILE`: creates what is missing and updates what differs, in dependency order, one
 * Resource at a time, each Operation waited for; a second run finds everything unchanged.
 * Stops at the first refusal or failed Operation; what came before it stays applied.
 */
export async function apply(ctx: Context, o: ApplyOptions): Promise<void> {
  const manifest = readManifest(o.file);
  if (manifest.space !== undefined && ctx.spaceFlag !== undefined && manifest.space !== ctx.spaceFlag) {
    throw new UsageError(`${o.file} is for Space ${manifest.space}, not --space ${ctx.spaceFlag}`);
  }
  const space = manifest.space ?? (await ctx.space());
  const existing = new Map((await ctx.client.list(space)).map((r) => [r.name, r]));
  const uids = new Map([...existing].map(([name, r]) => [name, r.uid]));
  const results: { kind: string; name: string; resourceUid: string; result: ApplyResult }[] = [];

  for (const entry of manifest.resources) {
    const { uid, result } = await applyOne(ctx, space, entry, existing.get(entry.name), uids, o.timeoutMs);
    uids.set(entry.name, uid);
    const ready = entry.kind === 'worker' ? await workerReady(ctx, space, entry.name, uid) : undefined;
    results.push({
      kind: entry.kind,
      name: entry.name,
      resourceUid: uid,
      result,
      ...(ready === undefined ? {} : { ready }),
    });
    ctx.line(`${entry.kind}/${entry.name} ${result}`);
  }
  ctx.document({ space, results });
}

/**
 * A worker Resource is only a name: whether the Host has code for it shows in `observed.ready`.
 * Said at once (on stderr, the result lines stay as they are), not first when a consumer of it is refused.
 */
async function workerReady(
  ctx: Context,
  space: string,
  name: string,
  uid: string,
): Promise<boolean | undefined> {
  const r = await ctx.client.request('GET', `${API_ROOT}/resources/${encodeURIComponent(uid)}`);
  const ready: unknown = r?.observed?.ready;
  if (ready === false) {
    ctx.note(
      `worker/${name}: not ready, the Host has no code for it that loads. Locally: a module ` +
        `<workers folder>/${space}/${name}.mjs exporting a plain object; on AWS: a ModuleWorkerFunction ` +
        `for ${space}/${name}. A consumer of it is refused until then.`,
    );
  }
  return typeof ready === 'boolean' ? ready : undefined;
}

async function applyOne(
  ctx: Context,
  space: string,
  entry: ManifestEntry,
  current: { uid: string; form: string; phase: string; generation: number; spec: unknown } | undefined,
  uids: ReadonlyMap<string, string>,
  timeoutMs: number,
): Promise<{ uid: string; result: ApplyResult }> {
  const form = KINDS[entry.kind];
  const label = `${entry.kind}/${entry.name}`;
  const { spec, missing } = resolveReferences(entry.spec, (name) => uids.get(name));
  if (missing.length > 0) {
    throw new RefusedError('not_found', `${label} references ${missing.join(', ')}, not in Space ${space}`);
  }
  const waiting = (what: string) => (op: Operation) => ctx.note(`${label}: ${what} (${op.status})…`);
  if (!current) {
    const op = await ctx.client.mutate('POST', '/resources', { form, space, name: entry.name, spec });
    const done = await ctx.client.waitFor(op, timeoutMs, waiting('creating'));
    return { uid: done.resourceUid, result: 'created' };
  }
  if (current.form !== form) {
    throw new RefusedError(
      'name_conflict',
      `${entry.name} is already a ${kindOf(current.form) ?? current.form} in Space ${space}`,
    );
  }
  if (current.phase === 'deleting') throw new RefusedError('resource_busy', `${label} is being deleted`);
  if (canonical(current.spec) === canonical(spec)) return { uid: current.uid, result: 'unchanged' };
  const op = await ctx.client.mutate(
    'PUT',
    `/resources/${encodeURIComponent(current.uid)}`,
    { spec },
    current.generation,
  );
  await ctx.client.waitFor(op, timeoutMs, waiting('updating'));
  return { uid: current.uid, result: 'updated' };
}
