import { Duration, RemovalPolicy, Validations } from 'aws-cdk-lib';
import type * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as iam from 'aws-cdk-lib/aws-iam';
import { Architecture, type CfnFunction, type ILayerVersion, Runtime } from 'aws-cdk-lib/aws-lambda';
import { type ICommandHooks, NodejsFunction, OutputFormat } from 'aws-cdk-lib/aws-lambda-nodejs';
import { LogGroup, RetentionDays } from 'aws-cdk-lib/aws-logs';
import { Construct } from 'constructs';
import { HOST_RESERVED_CONCURRENCY, type HostFunctionRole } from '../../lambdas/shared/host-concurrency.ts';

export interface HostFunctionProps {
  /** Absolute path of the TypeScript entry file. */
  readonly entry: string;
  /** @default 'handler' */
  readonly handler?: string;
  readonly description?: string;
  /** @default Duration.seconds(30) */
  readonly timeout?: Duration;
  /** MB. No default here: each function's comes from `HOST_FUNCTION_MEMORY_MB`, which the bench bills. */
  readonly memorySize: number;
  /** @default RetentionDays.ONE_MONTH */
  readonly logRetention?: RetentionDays;
  /** Applies to the log group. @default RemovalPolicy.RETAIN */
  readonly removalPolicy?: RemovalPolicy;
  /** Extra environment; use a construct's `bind*` method for anything that also needs a grant. */
  readonly environment?: Record<string, string>;
  /** A fixed function name (IAM can then be scoped by name prefix). @default a generated name */
  readonly functionName?: string;
  /** Extra esbuild command-line arguments, e.g. `{'--alias:pkg': '/abs/path'}`. @default none */
  readonly esbuildArgs?: Record<string, string | boolean>;
  /** Active X-Ray tracing. @default true */
  readonly tracing?: boolean;
  /** Reserved concurrent executions. @default none (the account's unreserved pool) */
  readonly reservedConcurrentExecutions?: number;
  /**
   * Folders copied next to the bundle after esbuild ran (files the code reads at run time, such
   * as the console's): absolute source folder → folder name in the bundle. @default none
   */
  readonly copyFolders?: Record<string, string>;
  /** Lambda layers. @default none */
  readonly layers?: ILayerVersion[];
  /** The function's network placement; its role then may manage its ENIs. @default no VPC */
  readonly vpc?: FunctionVpc;
}

/** A function in a VPC: the VPC, which of its subnets, and the security groups. */
export interface FunctionVpc {
  readonly vpc: ec2.IVpc;
  /** @default the VPC's private subnets (CDK's default selection) */
  readonly subnets?: ec2.SubnetSelection;
  /** @default one new group allowing all outbound traffic */
  readonly securityGroups?: ec2.ISecurityGroup[];
}

/** Memory and reserved concurrency of one function, as a construct's props give them. */
export interface FunctionSizing {
  /** MB, 128..10240. */
  readonly memorySize?: number;
  /** 1..100000; the function never runs more instances at once. @default none */
  readonly reservedConcurrentExecutions?: number;
}

/**
 * A Host function's sizing as deployed: `given` over the Host's default reservation
 * (`HOST_RESERVED_CONCURRENCY`), which `reserve: false` leaves out (accounts whose Lambda quota
 * is too small to reserve anything: Lambda keeps 100 of the account's pool unreserved).
 */
export function hostFunctionSizing(
  role: HostFunctionRole,
  given: FunctionSizing | undefined,
  reserve: boolean,
): FunctionSizing {
  const reserved =
    given?.reservedConcurrentExecutions ?? (reserve ? HOST_RESERVED_CONCURRENCY[role] : undefined);
  return { ...given, ...(reserved !== undefined ? { reservedConcurrentExecutions: reserved } : {}) };
}

/** Problems with a sizing, each prefixed with `label`. */
export function validateSizing(label: string, sizing: FunctionSizing | undefined): string[] {
  const errors: string[] = [];
  const memory = sizing?.memorySize;
  if (memory !== undefined && !(Number.isInteger(memory) && memory >= 128 && memory <= 10_240)) {
    errors.push(`${label}.memorySize must be an integer in 128..10240`);
  }
  const reserved = sizing?.reservedConcurrentExecutions;
  if (reserved !== undefined && !(Number.isInteger(reserved) && reserved >= 1 && reserved <= 100_000)) {
    errors.push(`${label}.reservedConcurrentExecutions must be an integer in 1..100000`);
  }
  return errors;
}

// Bundled ESM cannot call `require`, but CJS dependencies inlined by esbuild still do (through
// esbuild's `__require` shim). The alias keeps the banner from clashing with an esbuild import.
const ESM_REQUIRE_BANNER =
  "import { createRequire as __takoformCreateRequire } from 'node:module'; " +
  'const require = __takoformCreateRequire(import.meta.url);';

/** Single-quoted for the shell the bundling hooks run in. */
const shellQuote = (s: string) => `'${s.replaceAll("'", "'\\''")}'`;

function copyAfterBundling(folders: Record<string, string>): ICommandHooks {
  for (const into of Object.values(folders)) {
    if (!/^[a-z0-9-]{1,40}$/.test(into)) throw new Error(`copyFolders target ${into} is not a plain name`);
  }
  return {
    beforeBundling: () => [],
    beforeInstall: () => [],
    afterBundling: (_input, output) =>
      Object.entries(folders).map(
        ([from, into]) => `cp -R ${shellQuote(`${from}/.`)} ${shellQuote(`${output}/${into}`)}`,
      ),
  };
}

/**
 * A Lambda function with this project's defaults: Node 24 on arm64, one ESM bundle built by the
 * local esbuild (never Docker) with every dependency inlined, source maps, a dedicated log group
 * with retention, X-Ray tracing (unless turned off), and a role that holds only what is granted
 * to it.
 */
export class HostFunction extends Construct {
  readonly fn: NodejsFunction;
  readonly role: iam.Role;
  readonly logGroup: LogGroup;

  constructor(scope: Construct, id: string, props: HostFunctionProps) {
    super(scope, id);

    this.logGroup = new LogGroup(this, 'Logs', {
      retention: props.logRetention ?? RetentionDays.ONE_MONTH,
      removalPolicy: props.removalPolicy ?? RemovalPolicy.RETAIN,
    });

    // Our own role instead of the default one: the default attaches the AWS-managed
    // AWSLambdaBasicExecutionRole (logs:* on every log group). This one may write to its group only.
    this.role = new iam.Role(this, 'Role', {
      assumedBy: new iam.ServicePrincipal('lambda.amazonaws.com'),
      description: props.description,
    });
    this.logGroup.grantWrite(this.role);

    this.fn = new NodejsFunction(this, 'Function', {
      entry: props.entry,
      handler: props.handler ?? 'handler',
      description: props.description,
      runtime: Runtime.NODEJS_24_X,
      architecture: Architecture.ARM_64,
      memorySize: props.memorySize,
      timeout: props.timeout ?? Duration.seconds(30),
      role: this.role,
      logGroup: this.logGroup,
      ...(props.functionName ? { functionName: props.functionName } : {}),
      ...(props.reservedConcurrentExecutions !== undefined
        ? { reservedConcurrentExecutions: props.reservedConcurrentExecutions }
        : {}),
      environment: { NODE_OPTIONS: '--enable-source-maps', ...props.environment },
      ...(props.layers ? { layers: props.layers } : {}),
      ...(props.vpc
        ? {
            vpc: props.vpc.vpc,
            vpcSubnets: props.vpc.subnets,
            securityGroups: props.vpc.securityGroups,
          }
        : {}),
      bundling: {
        format: OutputFormat.ESM,
        banner: ESM_REQUIRE_BANNER,
        mainFields: ['module', 'main'],
        target: 'node24',
        minify: true,
        sourceMap: true,
        // Bundle the exact SDK versions the tests ran against, not the runtime's copy.
        externalModules: [],
        forceDockerBundling: false,
        ...(props.esbuildArgs ? { esbuildArgs: props.esbuildArgs } : {}),
        ...(props.copyFolders ? { commandHooks: copyAfterBundling(props.copyFolders) } : {}),
      },
    });

    if (props.tracing ?? true) this.enableTracing();
    if (props.vpc) this.allowNetworkInterfaces();
  }

  /**
   * Lambda places a VPC function with the execution role's rights on ENIs: the actions of AWS's
   * AWSLambdaVPCAccessExecutionRole (which CDK attaches only to roles it creates itself), in a
   * policy of their own that exists before the function does.
   */
  private allowNetworkInterfaces(): void {
    const eni = new iam.Policy(this, 'NetworkInterfacePolicy', {
      roles: [this.role],
      statements: [
        new iam.PolicyStatement({
          actions: [
            'ec2:AssignPrivateIpAddresses',
            'ec2:CreateNetworkInterface',
            'ec2:DeleteNetworkInterface',
            'ec2:DescribeNetworkInterfaces',
            'ec2:DescribeSubnets',
            'ec2:UnassignPrivateIpAddresses',
          ],
          resources: ['*'],
        }),
      ],
    });
    this.fn.node.addDependency(eni);
    Validations.of(eni).acknowledge({
      id: 'AwsSolutions-IAM5[Resource::*]',
      reason:
        "Lambda creates and deletes the function's network interfaces with its role; the Describe actions support no resource scope, and the ENIs' ids are not known before Lambda makes them (AWS's own AWSLambdaVPCAccessExecutionRole grants these on *).",
    });
  }

  /**
   * Turns on active X-Ray tracing with the two X-Ray actions in a policy of their own. The
   * `tracing` prop would put them (on Resource "*") into the role's default policy, where
   * acknowledging the wildcard would also hide any later wildcard grant to this role.
   */
  private enableTracing(): void {
    (this.fn.node.defaultChild as CfnFunction).tracingConfig = { mode: 'Active' };
    const tracing = new iam.Policy(this, 'TracingPolicy', {
      roles: [this.role],
      statements: [
        new iam.PolicyStatement({
          actions: ['xray:PutTraceSegments', 'xray:PutTelemetryRecords'],
          resources: ['*'],
        }),
      ],
    });
    this.fn.node.addDependency(tracing);
    Validations.of(tracing).acknowledge({
      id: 'AwsSolutions-IAM5[Resource::*]',
      reason: 'xray:PutTraceSegments and xray:PutTelemetryRecords do not support resource-level permissions.',
    });
  }
}
