import { type Context, checkedName } from './context.ts';
import { RefusedError, UsageError } from './errors.ts';
import type { Resource } from './host-client.ts';
import { isKind, KIND_NAMES, KINDS, type Kind, kindOf } from './kinds.ts';

export function parseKind(value: string): Kind {
  if (!isKind(value))
    throw new UsageError(`unknown kind ${JSON.stringify(value)} (one of ${KIND_NAMES.join(', ')})`);
  return value;
}

function row(r: Resource): string {
  return [kindOf(r.form) ?? r.form, r.name, r.uid, r.phase, `gen ${r.generation}`].join('\t');
}

/** `get [KIND] [NAME]`: a list of Resources, or one Resource in full. */
export async function get(
  ctx: Context,
  kindArg: string | undefined,
  nameArg: string | undefined,
): Promise<void> {
  // `get orders`: one name, whatever its kind (names are unique in a Space).
  const byNameOnly = kindArg !== undefined && nameArg === undefined && !isKind(kindArg);
  const kind = kindArg === undefined || byNameOnly ? undefined : parseKind(kindArg);
  const name = byNameOnly ? kindArg : nameArg;
  const space = await ctx.space();
  if (name === undefined) {
    const items = await ctx.client.list(space, kind ? { form: KINDS[kind] } : {});
    for (const r of items) ctx.line(row(r));
    if (items.length === 0) ctx.note(`no Resources in Space ${space}`);
    ctx.document({ items });
    return;
  }
  const q = { name: checkedName(name, 'name'), ...(kind ? { form: KINDS[kind] } : {}) };
  const [r] = await ctx.client.list(space, q);
  if (!r) throw new RefusedError('not_found', `no ${kind ?? 'Resource'} ${name} in Space ${space}`);
  ctx.line(row(r));
  ctx.line(`spec: ${JSON.stringify(r.spec)}`);
  ctx.line(`observed: ${JSON.stringify(r.observed ?? null)} (checked ${r.observedAt ?? 'never'})`);
  ctx.document(r);
}

/** `delete KIND NAME`: deletes by name with the current generation and waits for the Operation. */
export async function remove(ctx: Context, kindArg: string, name: string, timeoutMs: number): Promise<void> {
  const kind = parseKind(kindArg);
  const space = await ctx.space();
  const r = await ctx.client.find(space, KINDS[kind], checkedName(name, 'name'));
  if (!r) throw new RefusedError('not_found', `no ${kind} ${name} in Space ${space}`);
  const op = await ctx.client.mutate(
    'DELETE',
    `/resources/${encodeURIComponent(r.uid)}`,
    undefined,
    r.generation,
  );
  const done = await ctx.client.waitFor(op, timeoutMs, (o) =>
    ctx.note(`${kind}/${name}: deleting (${o.status})…`),
  );
  ctx.line(`${kind}/${name} deleted`);
  ctx.document({ kind, name, resourceUid: r.uid, operation: done });
}
