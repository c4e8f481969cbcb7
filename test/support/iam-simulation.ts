/**
 * The identity policies of a role in a synthesized template, resolved to the strings they would be
 * on AWS, and one request evaluated against them by @cloud-copilot/iam-simulate (which checks
 * actions, resource types and condition keys against AWS's service authorization data).
 *
 * Not modelled: SCPs, resource policies (queue policies, KMS key policies), permission boundaries,
 * session policies; a condition is evaluated only on the context a caller passes.
 */
import { runSimulation } from '@cloud-copilot/iam-simulate';
import type { CfnElement, Stack } from 'aws-cdk-lib';
import type { Template } from 'aws-cdk-lib/assertions';
import type { IConstruct } from 'constructs';
import { resolveIntrinsics } from './template-values.ts';

export const ACCOUNT = '111111111111';
export const REGION = 'us-east-1';
/** What `Fn::GetAtt` of the Host table resolves to. */
export const TABLE_ARN = `arn:aws:dynamodb:${REGION}:${ACCOUNT}:table/host-table`;

export type SimulationResult = 'Allowed' | 'ImplicitlyDenied' | 'ExplicitlyDenied';

export interface PolicyDocument {
  Statement: { Effect: string; Action?: string | string[]; Resource?: string | string[] }[];
}

export class SynthesizedPolicies {
  private readonly stack: Stack;
  private readonly template: Template;
  private readonly tableLogicalId: string;

  constructor(stack: Stack, template: Template, table: IConstruct) {
    this.stack = stack;
    this.template = template;
    this.tableLogicalId = this.id(table);
  }

  /** The logical id of a construct's CloudFormation resource. */
  id(c: IConstruct): string {
    return this.stack.getLogicalId((c.node.defaultChild ?? c) as CfnElement);
  }

  /** The ARN a function gets on AWS, as the resolved policies name it. */
  functionArn(fn: IConstruct): string {
    return `arn:aws:lambda:${REGION}:${ACCOUNT}:function:${this.id(fn)}`;
  }

  /** A template value with the stack's intrinsics resolved to concrete ARNs. */
  resolve(v: unknown): unknown {
    return resolveIntrinsics(v, {
      account: ACCOUNT,
      region: REGION,
      getAtt: (logicalId) =>
        logicalId === this.tableLogicalId
          ? TABLE_ARN
          : `arn:aws:lambda:${REGION}:${ACCOUNT}:function:${logicalId}`,
    });
  }

  /** Every identity policy attached to `role`, resolved. */
  of(role: IConstruct): { name: string; policy: PolicyDocument }[] {
    const ref = JSON.stringify({ Ref: this.id(role) });
    return Object.entries(this.template.findResources('AWS::IAM::Policy'))
      .filter(([, p]) => JSON.stringify(p.Properties.Roles).includes(ref))
      .map(([name, p]) => ({ name, policy: this.resolve(p.Properties.PolicyDocument) as PolicyDocument }));
  }

  /** Every action an Allow statement of `role`'s policies names. */
  allowedActions(role: IConstruct): Set<string> {
    const actions = new Set<string>();
    for (const { policy } of this.of(role))
      for (const s of policy.Statement)
        if (s.Effect === 'Allow') for (const a of [s.Action ?? []].flat()) actions.add(a);
    return actions;
  }

  /** One request against `role`'s identity policies; with `strictContext`, every key given must apply. */
  async simulate(
    role: IConstruct,
    action: string,
    resource: string,
    contextVariables: Record<string, string | string[]> = {},
    strictContext = true,
  ): Promise<SimulationResult> {
    const result = await runSimulation(
      {
        request: {
          principal: `arn:aws:iam::${ACCOUNT}:role/${this.id(role)}`,
          action,
          resource: { resource, accountId: ACCOUNT },
          contextVariables,
        },
        identityPolicies: this.of(role),
        serviceControlPolicies: [],
        resourceControlPolicies: [],
      },
      {},
    );
    if (result.resultType === 'error')
      throw new Error(`${action} ${resource}: ${JSON.stringify(result.errors)}`);
    // `*` is the resource of an action without resource-level permissions (a "wildcard" result of one run).
    if (result.resultType === 'wildcard' && resource === '*' && result.results.length === 1)
      return result.overallResult as SimulationResult;
    if (result.resultType !== 'single')
      throw new Error(`unexpected ${result.resultType} result for ${resource}`);
    const ignored = result.result.ignoredContextKeys ?? [];
    if (strictContext && ignored.length > 0)
      throw new Error(`${action} ${resource}: context keys that do not apply: ${ignored.join(', ')}`);
    return result.overallResult as SimulationResult;
  }
}
