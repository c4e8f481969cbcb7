import { readFileSync } from 'node:fs';
import path from 'node:path';
import { CONNECTION_FILE, type LocalConnection } from '../lambdas/local/data-dir.ts';
import { RefusedError, UsageError } from './errors.ts';

export interface ConnectionFlags {
  origin?: string;
  key?: string;
  dataDir?: string;
}

/** Where requests go and the key they carry (never printed). */
export interface Connection {
  origin: string;
  key: string;
  /** Where it was found, for messages: `--origin`, `TAKOFORM_ORIGIN` or the data folder. */
  source: string;
}

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
      `no running Host found in ${dataDir} (start one with npm start, or pass --origin and --key)`,
    );
  }
  return { origin: c.listen, key: readText(path.join(dataDir, 'dev-api-key'))?.trim() || undefined };
}

/**
 * `--origin`/`--key`, else `TAKOFORM_ORIGIN`/`TAKOFORM_API_KEY`, else the local Host running on
 * `--data-dir` (default `.data`), host-profile §6.
 */
export function resolveConnection(flags: ConnectionFlags, env: NodeJS.ProcessEnv): Connection {
  const origin = flags.origin ?? (env.TAKOFORM_ORIGIN || undefined);
  const key = flags.key ?? (env.TAKOFORM_API_KEY || undefined);
  if (origin !== undefined) {
    const from = flags.origin !== undefined ? '--origin' : 'TAKOFORM_ORIGIN';
    if (!key) throw new UsageError(`${from} needs an API key: pass --key or set TAKOFORM_API_KEY`);
    return { origin: checkedOrigin(origin, from), key, source: from };
  }
  const dataDir = path.resolve(flags.dataDir ?? '.data');
  const local = localHost(dataDir);
  const found = key ?? local.key;
  if (!found) {
    throw new UsageError(
      `the Host on ${dataDir} has no development key (it runs with --principals): pass --key or set TAKOFORM_API_KEY`,
    );
  }
  return { origin: local.origin, key: found, source: dataDir };
}
