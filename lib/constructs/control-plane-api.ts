import { Duration, type RemovalPolicy, Stack, Token, Validations } from 'aws-cdk-lib';
import {
  AccessLogFormat,
  type CfnRestApi,
  EndpointType,
  LambdaIntegration,
  LogGroupLogDestination,
  MethodLoggingLevel,
  RestApi,
} from 'aws-cdk-lib/aws-apigateway';
import { LogGroup, RetentionDays } from 'aws-cdk-lib/aws-logs';
import { CfnWebACL, CfnWebACLAssociation } from 'aws-cdk-lib/aws-wafv2';
import { Construct } from 'constructs';
import { parsePublicOrigin } from '../../lambdas/http/origin.ts';
import { HOST_FUNCTION_MEMORY_MB } from '../../lambdas/shared/host-function-memory.ts';
import { type FunctionSizing, HostFunction } from './host-function.ts';
import { lambdaEntry, lambdaPath } from './lambda-entry.ts';

const API_ENTRY = lambdaEntry('entries/api.ts');
/** The console's static files, read by `lambdas/console/console-routes.ts` from `console/` in the bundle. */
const CONSOLE_ASSETS = lambdaPath('console/assets');
/** The documentation pages discovery links to, read by `lambdas/docs/docs-routes.ts` from `docs/`. */
const DOCS_PAGES = lambdaPath('docs/pages');

export interface ControlPlaneApiProps {
  /** The REST API's name, also the `ApiName` dimension of its metrics: one per Host. @default 'Api' */
  readonly restApiName?: string;
  /**
   * The origin clients use (`https://host[:port]`, no path), normally a custom domain mapped at
   * the root. @default the execute-api host, which is not conformant: its stage prefix is missing.
   */
  readonly publicOrigin?: string;
  /** @default 'prod' */
  readonly stageName?: string;
  /** Stage-wide steady-state requests per second. @default 100 */
  readonly throttlingRateLimit?: number;
  /** @default 200 */
  readonly throttlingBurstLimit?: number;
  /** Lambda timeout; API Gateway itself gives up after 29 s. @default Duration.seconds(29) */
  readonly timeout?: Duration;
  /** For the access log and the function's log group. @default RetentionDays.ONE_MONTH */
  readonly logRetention?: RetentionDays;
  /** For the log groups. @default RemovalPolicy.RETAIN */
  readonly removalPolicy?: RemovalPolicy;
  /**
   * Set the account-wide API Gateway CloudWatch role, which stage execution logging needs.
   * Turn off only when the account already has one. @default true
   */
  readonly cloudWatchRole?: boolean;
  /** Turn off the default execute-api endpoint (clients then use a custom domain). @default false */
  readonly disableExecuteApiEndpoint?: boolean;
  /** A regional WAFv2 web ACL to associate with the stage. @default none */
  readonly webAclArn?: string;
  /**
   * Without `webAclArn`: requests one source IP may make in 5 minutes before a web ACL this
   * construct makes answers it 429 (a WAF rate-based rule); `false` makes none.
   * @default DEFAULT_RATE_LIMIT_PER_IP
   */
  readonly rateLimitPerIp?: number | false;
  /** Active X-Ray tracing of the stage and the function. @default true */
  readonly tracing?: boolean;
  /** Memory and reserved concurrency of the API function. @default 512 MB, none reserved */
  readonly sizing?: FunctionSizing;
}

/**
 * Requests per source IP in WAF's 5-minute window: 10 a second on average, a tenth of the stage's
 * default rate, so one client — anonymous ones included, since the stage throttle runs before the
 * Lambda sees any credential — cannot spend the stage's throttle for everyone.
 */
export const DEFAULT_RATE_LIMIT_PER_IP = 3_000;
/** WAF's bounds on a rate-based rule's limit. */
export const RATE_LIMIT_PER_IP_RANGE = [10, 2_000_000_000] as const;

/** Host API v2 over HTTP: a REST API that sends every path and method to one Lambda. */
export class ControlPlaneApi extends Construct {
  readonly api: RestApi;
  readonly handler: HostFunction;
  readonly accessLogs: LogGroup;
  /** The stage's web ACL association: `webAclArn`'s, or that of the web ACL made here. */
  readonly webAclAssociation?: CfnWebACLAssociation;
  /** The web ACL with the per-IP rate rule, unless `webAclArn` was given or `rateLimitPerIp` is false. */
  readonly webAcl?: CfnWebACL;
  /** The origin the Host advertises: `publicOrigin`, or the execute-api host without its stage. */
  readonly publicOrigin: string;

  constructor(scope: Construct, id: string, props: ControlPlaneApiProps = {}) {
    super(scope, id);
    // Fail at synth, not on the first request, when a literal origin is malformed.
    const origin = props.publicOrigin;
    const publicOrigin =
      origin === undefined || Token.isUnresolved(origin) ? origin : parsePublicOrigin(origin);
    const retention = props.logRetention ?? RetentionDays.ONE_MONTH;

    this.accessLogs = new LogGroup(this, 'AccessLogs', { retention, removalPolicy: props.removalPolicy });
    this.api = new RestApi(this, 'Api', {
      ...(props.restApiName ? { restApiName: props.restApiName } : {}),
      description: 'Takoform Host API v2',
      endpointConfiguration: { types: [EndpointType.REGIONAL] },
      cloudWatchRole: props.cloudWatchRole ?? true,
      disableExecuteApiEndpoint: props.disableExecuteApiEndpoint ?? false,
      deployOptions: {
        stageName: props.stageName ?? 'prod',
        accessLogDestination: new LogGroupLogDestination(this.accessLogs),
        accessLogFormat: AccessLogFormat.jsonWithStandardFields(),
        // Errors only, and never request/response data: requests carry Bearer API keys.
        loggingLevel: MethodLoggingLevel.ERROR,
        dataTraceEnabled: false,
        tracingEnabled: props.tracing ?? true,
        throttlingRateLimit: props.throttlingRateLimit ?? 100,
        throttlingBurstLimit: props.throttlingBurstLimit ?? 200,
      },
    });

    this.publicOrigin = publicOrigin ?? this.executeApiOrigin();
    this.handler = new HostFunction(this, 'Handler', {
      entry: API_ENTRY,
      description: 'Takoform Host API v2 (API Gateway proxy)',
      timeout: props.timeout ?? Duration.seconds(29),
      memorySize: props.sizing?.memorySize ?? HOST_FUNCTION_MEMORY_MB.api,
      reservedConcurrentExecutions: props.sizing?.reservedConcurrentExecutions,
      tracing: props.tracing,
      logRetention: retention,
      removalPolicy: props.removalPolicy,
      environment: { TAKOFORM_PUBLIC_ORIGIN: this.publicOrigin },
      copyFolders: { [CONSOLE_ASSETS]: 'console', [DOCS_PAGES]: 'docs' },
    });

    // The Lambda routes by itself (discovery at the root, the API under /apis/..., the console at
    // /console), so API Gateway only forwards. No API Gateway console test-invoke permissions: they
    // would double the Lambda permissions.
    const integration = new LambdaIntegration(this.handler.fn, { allowTestInvoke: false });
    this.api.root.addMethod('ANY', integration);
    this.api.root.addProxy({ defaultIntegration: integration, anyMethod: true });

    const rate = props.webAclArn ? false : (props.rateLimitPerIp ?? DEFAULT_RATE_LIMIT_PER_IP);
    if (rate !== false) this.webAcl = this.rateLimitAcl(rate, props.restApiName ?? 'takoform-api');
    const webAclArn = props.webAclArn ?? this.webAcl?.attrArn;
    if (webAclArn) {
      this.webAclAssociation = new CfnWebACLAssociation(this, 'WebAcl', {
        resourceArn: this.api.deploymentStage.stageArn,
        webAclArn,
      });
    }
    this.acknowledgeFindings();
  }

  /**
   * A web ACL whose one rule blocks a source IP past `limit` requests in 5 minutes with a 429 in
   * the Host's error shape, until its rate falls back under the limit. Everything else passes.
   */
  private rateLimitAcl(limit: number, name: string): CfnWebACL {
    const metric = (suffix: string) => ({
      cloudWatchMetricsEnabled: true,
      metricName: `${name}-${suffix}`.replace(/[^A-Za-z0-9_-]/g, '-'),
      sampledRequestsEnabled: true,
    });
    return new CfnWebACL(this, 'RateLimit', {
      scope: 'REGIONAL',
      description: 'Takoform Host API: requests per source IP',
      defaultAction: { allow: {} },
      visibilityConfig: metric('acl'),
      customResponseBodies: {
        rateLimited: {
          contentType: 'APPLICATION_JSON',
          content: JSON.stringify({
            type: 'about:blank',
            title: 'Too Many Requests',
            status: 429,
            detail: 'Too many requests from this address; retry later.',
          }),
        },
      },
      rules: [
        {
          name: 'RequestsPerSourceIp',
          priority: 0,
          action: { block: { customResponse: { responseCode: 429, customResponseBodyKey: 'rateLimited' } } },
          statement: { rateBasedStatement: { limit, aggregateKeyType: 'IP', evaluationWindowSec: 300 } },
          visibilityConfig: metric('per-ip'),
        },
      ],
    });
  }

  /** The execute-api host without the stage path; a stand-in until a custom domain is mapped. */
  private executeApiOrigin(): string {
    const stack = Stack.of(this);
    return `https://${this.api.restApiId}.execute-api.${stack.region}.${stack.urlSuffix}`;
  }

  /** cdk-nag findings this design accepts, each on the one resource it concerns. */
  private acknowledgeFindings(): void {
    Validations.of(this.api.node.defaultChild as CfnRestApi).acknowledge({
      id: 'AwsSolutions-APIG2',
      reason: "The API Lambda's strict zod parser validates every request and answers with problem+json.",
    });
    if (!this.webAclAssociation) {
      Validations.of(this.api.deploymentStage).acknowledge({
        id: 'AwsSolutions-APIG3',
        reason:
          'rateLimitPerIp is false and no webAclArn was given: the TakoformHost webAclArn prop associates a regional WAFv2 web ACL with this stage (docs/deploy.md, "WAF").',
      });
    }
    for (const method of this.api.methods) {
      Validations.of(method).acknowledge(
        {
          id: 'AwsSolutions-APIG4',
          reason: 'The Host authenticates Bearer API keys in the Lambda, and discovery must stay public.',
        },
        {
          id: 'AwsSolutions-COG4',
          reason: 'Callers are Host API-key principals, not Cognito users; the Lambda checks their tokens.',
        },
      );
    }
    const cloudWatchRole = this.api.node.tryFindChild('CloudWatchRole');
    if (cloudWatchRole) {
      Validations.of(cloudWatchRole).acknowledge({
        id: 'AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AmazonAPIGatewayPushToCloudWatchLogs]',
        reason: 'The AWS-managed policy is the documented one for the account-wide API Gateway logging role.',
      });
    }
  }
}
