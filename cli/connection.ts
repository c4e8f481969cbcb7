import { readFileSync } from 'node:fs';
import path from 'node:path';
import { CONNECTION_FILE, type LocalConnection } from '../lambdas/local/data-dir.ts';
import { RefusedError, UsageError } from './errors.ts';
import { loadProfile, type Profile } from './profiles.ts';

export interface ConnectionFlags {
  origin?: string;
  key?: string;
  dataDir?: string;
  profile?: string;
}

/** Where requests go and the key they carry (never printed). */
export interface Connection {
  origin: string;
  key: string;
  /** Where it was found, for messages: `--origin`, `TAKOFORM_ORIGIN`, a profile or the data folder. */
  source: string;
  /** Where the key came from, for the hint after a refused key. */
  keySource: string;
  /** The profile's Space, used when `--space` is not given. */
  space?: string;
}

/** Where a local Host keeps its development key (`npm start`, `takoform dev`). */
export const DEV_KEY_FILE = 'dev-api-key';

function readText(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
}

function checkedOrigin(raw: string, from: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new UsageError(`${from} is not a URL`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new UsageError(`${from} must be an http or https URL`);
  }
  // A path is kept (an execute-api stage, a proxy prefix); a trailing slash is not.
  return `${url.origin}${url.pathname.replace(/\/+$/, '')}`;
}

/** The local Host of a data folder, from what it writes while it runs (`host.json`, `dev-api-key`). */
function localHost(dataDir: string): { origin: string; key: string | undefined } {
  const text = readText(path.join(dataDir, CONNECTION_FILE));
  let c: Partial<LocalConnection> | undefined;
  try {
    c = text ? JSON.parse(text) : undefined;
  } catch {
    c = undefined;
  }
  if (typeof c?.listen !== 'string') {
    throw new RefusedError(
      'no_local_host',
      `no running Host found in ${dataDir} (start one with takoform dev or npm start, or pass --origin and --key)`,
    );
  }
  return { origin: c.listen, key: readText(path.join(dataDir, DEV_KEY_FILE))?.trim() || undefined };
}

function fromLocal(dataDir: string, key: string | undefined, keySource: string): Connection {
  const local = localHost(dataDir);
  const found = key ?? local.key;
  if (!found) {
    throw new UsageError(
      `the Host on ${dataDir} has no development key (it runs with --principals): pass --key or set TAKOFORM_API_KEY`,
    );
  }
  return {
    origin: local.origin,
    key: found,
    source: dataDir,
    keySource: key ? keySource : path.join(dataDir, DEV_KEY_FILE),
  };
}

function fromProfile(p: Profile, flags: ConnectionFlags, env: NodeJS.ProcessEnv): Connection {
  const given = flags.key !== undefined ? '--key' : undefined;
  const key = flags.key ?? p.key ?? (env.TAKOFORM_API_KEY || undefined);
  const keySource = given ?? (p.key ? p.label : 'TAKOFORM_API_KEY');
  const space = p.space === undefined ? {} : { space: p.space };
  if (p.origin === undefined) {
    return { ...fromLocal(path.resolve(flags.dataDir ?? p.dataDir ?? '.data'), key, keySource), ...space };
  }
  if (!key) {
    throw new UsageError(`${p.label} has no key: add key: to it, pass --key or set TAKOFORM_API_KEY`);
  }
  return { origin: checkedOrigin(p.origin, `${p.label}: origin`), key, source: p.label, keySource, ...space };
}

/**
 * `--origin`/`--key`, else a named Host of the profile file (`--profile`, `TAKOFORM_PROFILE`), else
 * `TAKOFORM_ORIGIN`/`TAKOFORM_API_KEY`, else the local Host running on `--data-dir` (default
 * `.data`), host-profile §6. `--key` given on the command line always wins.
 */
export function resolveConnection(flags: ConnectionFlags, env: NodeJS.ProcessEnv): Connection {
  const profileName = flags.profile ?? (env.TAKOFORM_PROFILE || undefined);
  if (flags.origin === undefined && profileName !== undefined) {
    return fromProfile(loadProfile(profileName, env), flags, env);
  }
  const origin = flags.origin ?? (env.TAKOFORM_ORIGIN || undefined);
  const key = flags.key ?? (env.TAKOFORM_API_KEY || undefined);
  const keySource = flags.key !== undefined ? '--key' : 'TAKOFORM_API_KEY';
  if (origin !== undefined) {
    const from = flags.origin !== undefined ? '--origin' : 'TAKOFORM_ORIGIN';
    if (!key) throw new UsageError(`${from} needs an API key: pass --key or set TAKOFORM_API_KEY`);
    return { origin: checkedOrigin(origin, from), key, source: from, keySource };
  }
  return fromLocal(path.resolve(flags.dataDir ?? '.data'), key, keySource);
}

/** What to do about a key the Host refused: where this one came from, and where others are. */
export function keyHint(c: Connection): string {
  return (
    `the key came from ${c.keySource}; pass another with --key or TAKOFORM_API_KEY ` +
    `(a local Host's development key is in its data folder: .data/${DEV_KEY_FILE} unless --data-dir says otherwise)`
  );
}
