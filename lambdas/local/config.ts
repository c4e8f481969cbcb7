import path from 'node:path';
import { parseArgs } from 'node:util';
import { parsePublicOrigin } from '../http/origin.ts';

/** Options of `npm start` (host-profile §2); each also reads a TAKOFORM_* environment variable. */
export interface LocalHostConfig {
  port: number;
  dataDir: string;
  workersDir: string;
  /** Undefined: advertise http://127.0.0.1:<bound port>. */
  publicOrigin: string | undefined;
  principalsFile: string | undefined;
  workerTimeoutSeconds: number;
}

export const USAGE = `Usage: npm start -- [options]
  --port N               listen on 127.0.0.1:N (default 8787; 0 takes a free port)   TAKOFORM_PORT
  --data-dir DIR         persistent state (default .data)                            TAKOFORM_DATA_DIR
  --workers-dir DIR      ModuleWorker code, DIR/<space>/<name>.mjs (default workers) TAKOFORM_WORKERS_DIR
  --public-origin URL    origin advertised to clients (default http://127.0.0.1:PORT) TAKOFORM_PUBLIC_ORIGIN
  --principals FILE      principals and API keys (default: a generated dev key)       TAKOFORM_PRINCIPALS
  --worker-timeout S     cut off a hung worker invocation after S seconds (900)       TAKOFORM_WORKER_TIMEOUT
  --help                 print this text`;

export class ConfigError extends Error {
  override name = 'ConfigError';
}

function integer(name: string, raw: string, min: number, max: number): number {
  if (!/^\d+$/.test(raw) || Number(raw) < min || Number(raw) > max) {
    throw new ConfigError(`${name} must be an integer in ${min}..${max}, got ${JSON.stringify(raw)}`);
  }
  return Number(raw);
}

export function parseConfig(argv: string[], env: NodeJS.ProcessEnv, cwd: string): LocalHostConfig | 'help' {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    allowPositionals: false,
    options: {
      port: { type: 'string' },
      'data-dir': { type: 'string' },
      'workers-dir': { type: 'string' },
      'public-origin': { type: 'string' },
      principals: { type: 'string' },
      'worker-timeout': { type: 'string' },
      help: { type: 'boolean' },
    },
  });
  if (values.help) return 'help';
  const pick = (flag: keyof typeof values, variable: string) =>
    (values[flag] as string | undefined) ?? (env[variable] || undefined);
  const originRaw = pick('public-origin', 'TAKOFORM_PUBLIC_ORIGIN');
  let publicOrigin: string | undefined;
  if (originRaw !== undefined) {
    try {
      publicOrigin = parsePublicOrigin(originRaw);
    } catch (err) {
      throw new ConfigError(`--public-origin: ${(err as Error).message}`);
    }
  }
  const principals = pick('principals', 'TAKOFORM_PRINCIPALS');
  return {
    port: integer('--port', pick('port', 'TAKOFORM_PORT') ?? '8787', 0, 65535),
    dataDir: path.resolve(cwd, pick('data-dir', 'TAKOFORM_DATA_DIR') ?? '.data'),
    workersDir: path.resolve(cwd, pick('workers-dir', 'TAKOFORM_WORKERS_DIR') ?? 'workers'),
    publicOrigin,
    principalsFile: principals === undefined ? undefined : path.resolve(cwd, principals),
    workerTimeoutSeconds: integer(
      '--worker-timeout',
      pick('worker-timeout', 'TAKOFORM_WORKER_TIMEOUT') ?? '900',
      1,
      43_200,
    ),
  };
}
