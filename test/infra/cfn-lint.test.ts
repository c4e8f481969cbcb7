/**
 * OPS-01: every template variant the app synthesizes passes cfn-lint (the CloudFormation
 * resource specification and best-practice rules): no errors, and every warning either fixed in
 * lib/ or listed in cfn-lint-allowed.json with its reason.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { App, Stack } from 'aws-cdk-lib';
import { Key } from 'aws-cdk-lib/aws-kms';
import { HostedZone, type IHostedZone } from 'aws-cdk-lib/aws-route53';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ModuleWorkerFunction } from '../../lib/constructs/module-worker-function.ts';
import { TakoformHostStack, type TakoformHostStackProps } from '../../lib/host-stack.ts';
import {
  type AllowedFinding,
  applyAllowList,
  CFN_LINT_ADVICE,
  type CfnLintFinding,
  cfnLintVersion,
  runCfnLint,
} from '../support/cfn-lint.ts';

const CDK_CONTEXT = JSON.parse(readFileSync(new URL('../../cdk.json', import.meta.url), 'utf8')).context;
const NO_BUNDLING = { ...CDK_CONTEXT, 'aws:cdk:bundling-stacks': [] };
const ALLOWED: AllowedFinding[] = JSON.parse(
  readFileSync(new URL('./cfn-lint-allowed.json', import.meta.url), 'utf8'),
);
const ECHO_WORKER = fileURLToPath(new URL('../../examples/workers/default/echo.mjs', import.meta.url));

const KEY_ARN = 'arn:aws:kms:us-east-1:111111111111:key/';
const CUSTOM_DOMAIN = {
  domainName: 'api.example.com',
  certificateArn: 'arn:aws:acm:us-east-1:111111111111:certificate/abc',
};

/**
 * The variants bin/app.ts can synthesize (plain, with the example worker, with a custom domain),
 * and one with every landing-zone prop set.
 */
const VARIANTS: Record<string, { props?: (zone: IHostedZone) => TakoformHostStackProps; worker?: boolean }> =
  {
    default: {},
    exampleWorker: { worker: true },
    customDomain: { props: () => CUSTOM_DOMAIN },
    landingZone: {
      worker: true,
      props: (zone) => ({
        ...CUSTOM_DOMAIN,
        env: { account: '111111111111', region: 'us-east-1' },
        tableEncryptionKey: Key.fromKeyArn(
          zone.stack,
          'TableKey',
          `${KEY_ARN}11111111-2222-3333-4444-555555555555`,
        ),
        queueEncryptionKey: Key.fromKeyArn(
          zone.stack,
          'QueueKey',
          `${KEY_ARN}66666666-7777-8888-9999-000000000000`,
        ),
        queueTags: { 'cost-center': 'cc-42' },
        cloudWatchRole: false,
        disableExecuteApiEndpoint: true,
        hostedZone: zone,
        webAclArn:
          'arn:aws:wafv2:us-east-1:111111111111:regional/webacl/takoform/0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b',
        tracing: false,
        hostFunctions: { api: { memorySize: 1024, reservedConcurrentExecutions: 50 } },
      }),
    },
  };

const root = mkdtempSync(join(tmpdir(), 'takoform-cfn-lint-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** Synthesizes one variant into its own directory; returns the template's path. */
function synthVariant(name: string): string {
  const { props, worker } = VARIANTS[name]!;
  const outdir = join(root, name);
  const app = new App({ outdir, context: NO_BUNDLING });
  // An imported zone is two literals: no reference between the stacks, only the Host's is linted.
  const zone = HostedZone.fromHostedZoneAttributes(new Stack(app, 'Zones'), 'Zone', {
    hostedZoneId: 'Z0123456789ABCDEFGHIJ',
    zoneName: 'example.com',
  });
  const stack = new TakoformHostStack(app, 'TakoformHost', props?.(zone));
  if (worker) {
    new ModuleWorkerFunction(stack, 'EchoWorker', {
      host: stack.host.workerBinding,
      entry: ECHO_WORKER,
      space: 'default',
      name: 'echo',
    });
  }
  app.synth();
  return join(outdir, `${stack.stackName}.template.json`);
}

describe('OPS-01: cfn-lint', () => {
  /** Findings on the real variants, and on a deliberately broken copy of the default one. */
  let findings: CfnLintFinding[];
  let brokenFindings: CfnLintFinding[];
  let brokenTableId: string;

  beforeAll(() => {
    cfnLintVersion(); // fails here, with the install advice, when the tool is missing
    const templates = Object.keys(VARIANTS).map(synthVariant);
    // The default template with one property CloudFormation does not know.
    const template = JSON.parse(readFileSync(templates[0]!, 'utf8'));
    [brokenTableId] = Object.entries(template.Resources).find(
      ([, r]) => (r as { Type: string }).Type === 'AWS::DynamoDB::GlobalTable',
    )!;
    template.Resources[brokenTableId].Properties.NotAProperty = true;
    const broken = join(root, 'broken.template.json');
    writeFileSync(broken, JSON.stringify(template));
    // One cfn-lint process for all of them: its start-up is most of its run time.
    const all = runCfnLint([...templates, broken]);
    findings = all.filter((f) => f.file !== broken);
    brokenFindings = all.filter((f) => f.file === broken);
  });

  it('OPS-01: no template variant (default, example worker, custom domain, landing-zone props) has a cfn-lint error', () => {
    expect(findings.filter((f) => f.level === 'Error')).toEqual([]);
  });

  it('OPS-01: every warning is on the allow-list, with a reason', () => {
    const { unexplained } = applyAllowList(findings, ALLOWED);
    expect(unexplained).toEqual([]);
    for (const entry of ALLOWED) expect(entry.reason.length).toBeGreaterThan(40);
  });

  it('OPS-01: every allow-list entry still matches a finding (none stale)', () => {
    expect(applyAllowList(findings, ALLOWED).unused).toEqual([]);
  });

  it('OPS-01: the linter reads these templates (an unknown property is reported as an error)', () => {
    const errors = brokenFindings.filter((f) => f.level === 'Error');
    expect(errors.map((f) => [f.rule, f.path])).toEqual([
      ['E3002', `Resources/${brokenTableId}/Properties/NotAProperty`],
    ]);
  });

  it('OPS-01: a missing cfn-lint fails with the install advice; npm test provisions it before the tests', () => {
    expect(() => cfnLintVersion('/nonexistent/cfn-lint')).toThrow(CFN_LINT_ADVICE);
    const test = readFileSync(new URL('../../scripts/test.sh', import.meta.url), 'utf8');
    expect(test).toMatch(/^\. scripts\/python-tools\.sh cfn-lint$/m);
  });
});
