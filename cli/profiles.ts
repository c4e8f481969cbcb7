import { readFileSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { ID_PATTERN } from '../lambdas/engine/ids.ts';
import { UsageError, whyUnreadable } from './errors.ts';

/**
 * One named Host of the profile file: a deployed one (`origin`, `key`) or a local one
 * (`dataDir`), with the Space to use when `--space` is not given.
 */
export interface Profile {
  /** `profile NAME in FILE`, for messages. */
  label: string;
  origin?: string;
  key?: string;
  dataDir?: string;
  space?: string;
}

const profileSchema = z
  .strictObject({
    origin: z.string().min(1).optional(),
    key: z.string().min(1).optional(),
    dataDir: z.string().min(1).optional(),
    space: z.string().regex(ID_PATTERN).optional(),
  })
  .refine((p) => (p.origin === undefined) !== (p.dataDir === undefined), {
    message: 'needs exactly one of origin (a deployed Host) and dataDir (a local one)',
  });
const fileSchema = z.strictObject({ hosts: z.record(z.string().regex(ID_PATTERN), profileSchema) });

/** `TAKOFORM_CONFIG`, else `$XDG_CONFIG_HOME/takoform/config`, else `~/.config/takoform/config`. */
export function profileFile(env: NodeJS.ProcessEnv): string {
  if (env.TAKOFORM_CONFIG) return path.resolve(env.TAKOFORM_CONFIG);
  const base = env.XDG_CONFIG_HOME || path.join(os.homedir(), '.config');
  return path.join(base, 'takoform', 'config');
}

function expandHome(p: string): string {
  return p === '~' || p.startsWith('~/') ? path.join(os.homedir(), p.slice(1)) : p;
}

/** The named Host `name` of the profile file (YAML; JSON is YAML too). */
export function loadProfile(name: string, env: NodeJS.ProcessEnv): Profile {
  const file = profileFile(env);
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new UsageError(`profile ${name}: cannot read ${file}: ${whyUnreadable(err)}`);
  }
  let value: unknown;
  try {
    value = parseYaml(text, { uniqueKeys: true, maxAliasCount: 50 });
  } catch (err) {
    throw new UsageError(`${file} is not valid YAML (${(err as Error).message.split('\n')[0]})`);
  }
  const parsed = fileSchema.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue?.path.length ? issue.path.join('.') : '(top level)';
    throw new UsageError(`${file}: ${where}: ${issue?.message ?? 'invalid'}`);
  }
  const hosts = parsed.data.hosts;
  const p = Object.hasOwn(hosts, name) ? hosts[name] : undefined;
  if (!p) {
    const known = Object.keys(hosts);
    throw new UsageError(
      `no profile ${name} in ${file} (${known.length ? `it has ${known.join(', ')}` : 'it names no Hosts'})`,
    );
  }
  if (p.key !== undefined && (statSync(file).mode & 0o077) !== 0) {
    process.stderr.write(`takoform: ${file} holds API keys and others can read it: chmod 600 ${file}\n`);
  }
  const dataDir =
    p.dataDir === undefined ? {} : { dataDir: path.resolve(path.dirname(file), expandHome(p.dataDir)) };
  return { label: `profile ${name} in ${file}`, ...p, ...dataDir };
}
