import { ID_PATTERN } from '../lambdas/engine/ids.ts';
import { type ConnectionFlags, resolveConnection } from './connection.ts';
import { RefusedError, UsageError } from './errors.ts';
import { EXT_ROOT, HostClient, type Resource } from './host-client.ts';
import { KINDS } from './kinds.ts';

export interface CommonFlags extends ConnectionFlags {
  space?: string;
  json?: boolean;
}

/** What every command works with: a client, the Space, and how to print. */
export interface Context {
  client: HostClient;
  json: boolean;
  /** `--space` as given. */
  spaceFlag: string | undefined;
  /** The Space: `--space`, else the profile's, else the only one the key can write (asked once). */
  space(): Promise<string>;
  /** One line (or, with --json, nothing: commands print one document at the end). */
  line(text: string): void;
  /** With --json, the one JSON document on stdout. */
  document(value: unknown): void;
  /** Progress and notes for people: stderr, never mixed with the result. */
  note(text: string): void;
  /** The live queue Resource of that name in the Space, else a `not_found` refusal. */
  queue(name: string): Promise<Resource>;
}

export function checkedName(value: string, what: string): string {
  if (!ID_PATTERN.test(value)) throw new UsageError(`${what} ${JSON.stringify(value)} is not a valid name`);
  return value;
}

export function createContext(flags: CommonFlags, env: NodeJS.ProcessEnv = process.env): Context {
  const connection = resolveConnection(flags, env);
  const client = new HostClient(connection);
  const json = flags.json === true;
  if (flags.space !== undefined) checkedName(flags.space, '--space');
  const chosen = flags.space ?? connection.space;
  let space: Promise<string> | undefined;
  const ctx: Context = {
    client,
    json,
    spaceFlag: flags.space,
    space: () => {
      space ??= chosen !== undefined ? Promise.resolve(chosen) : onlyWritableSpace(client);
      return space;
    },
    line: (text) => {
      if (!json) process.stdout.write(`${text}\n`);
    },
    document: (value) => {
      if (json) process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
    },
    note: (text) => process.stderr.write(`${text}\n`),
    queue: async (name) => {
      const found = await client.find(await ctx.space(), KINDS.queue, checkedName(name, 'queue'));
      if (!found) {
        throw new RefusedError('not_found', `no queue ${name} in Space ${await ctx.space()}`);
      }
      return found;
    },
  };
  return ctx;
}

async function onlyWritableSpace(client: HostClient): Promise<string> {
  const me = await client.request('GET', `${EXT_ROOT}/me`);
  const writable = Object.entries(me.spaces as Record<string, string>)
    .filter(([, access]) => access === 'write')
    .map(([name]) => name);
  if (writable.length === 1) return writable[0] as string;
  throw new UsageError(
    writable.length === 0
      ? '--space is required (this key can write no Space)'
      : `--space is required (this key can write ${writable.join(', ')})`,
  );
}
