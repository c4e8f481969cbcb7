/**
 * The integration apps of test/integ (integ-runner's layout, @aws-cdk/integ-tests-alpha) as
 * `npm test` checks them without an AWS account: each is synthesized (bundling skipped, nothing
 * deployed) into a test case with its assertion stack, and integ-runner finds each through
 * integ.config.json. Deploying them is `npm run integ` (docs/integ-tests.md).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const APPS = readdirSync(join(ROOT, 'test/integ')).filter((f) => /^integ\..+\.ts$/.test(f));

type Template = { Resources: Record<string, { Type: string; Properties?: Record<string, unknown> }> };

describe('integration apps (OPS-01)', () => {
  const out = mkdtempSync(join(tmpdir(), 'takoform-integ-'));
  afterAll(() => rmSync(out, { recursive: true, force: true }));

  it('integ-runner finds every app through integ.config.json', () => {
    expect(APPS.length).toBeGreaterThan(0);
    const listed = execFileSync(join(ROOT, 'node_modules/.bin/integ-runner'), ['--list'], {
      cwd: ROOT,
      encoding: 'utf8',
    });
    expect(listed.split('\n').filter(Boolean).sort()).toEqual([...APPS].sort());
  });

  it.each(APPS)('%s synthesizes a test case with its assertions', (file) => {
    const dir = join(out, file);
    execFileSync(process.execPath, [join('test/integ', file)], {
      cwd: ROOT,
      env: {
        ...process.env,
        CDK_OUTDIR: dir,
        CDK_CONTEXT_JSON: JSON.stringify({ 'aws:cdk:bundling-stacks': [] }),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
      timeout: 120_000,
    });
    const integ = JSON.parse(readFileSync(join(dir, 'integ.json'), 'utf8'));
    const cases = Object.values(integ.testCases) as { stacks: string[]; assertionStackName: string }[];
    expect(cases.length).toBeGreaterThan(0);
    for (const c of cases) {
      const stacks = c.stacks.map(
        (s) => JSON.parse(readFileSync(join(dir, `${s}.template.json`), 'utf8')) as Template,
      );
      const types = stacks.flatMap((t) => Object.values(t.Resources).map((r) => r.Type));
      expect(types).toContain('AWS::ApiGateway::RestApi');
      expect(types).toContain('Custom::TakoformWorkerRegistration');
      const assertions = readFileSync(join(dir, `${c.assertionStackName}.template.json`), 'utf8');
      expect(JSON.parse(assertions).Resources).toBeDefined();
      if (file === 'integ.delivery.ts') {
        // A key, seven Resources applied, two sends, a delivery seen in the worker's log, a dead-letter move seen by a peek.
        expect(assertions.match(/"Custom::DeployAssert@HttpCall/g)?.length).toBeGreaterThanOrEqual(
          7 * 2 + 2 + 1,
        );
        expect(assertions).toMatch(/"api":\s*"putItem"/);
        expect(assertions).toMatch(/"api":\s*"filterLogEvents"/);
        expect(assertions).toContain('/peek');
        expect(assertions).toContain('\\"lastOutcome\\":\\"threw\\"');
      }
    }
  });
});
