/**
 * The only estimated part of the bench: counted calls converted to USD with AWS's published
 * us-east-1 on-demand prices (and Cloudflare's for comparison). Every price and where it was
 * read is printed with the results.
 */
import { HOST_FUNCTION_MEMORY_MB } from '../lambdas/shared/host-function-memory.ts';
import { hostFunctionOf, sumSdk, type Tally } from './support/meter.ts';

export const PRICES = {
  checked: '2026-11-29',
  region: 'us-east-1 (N. Virginia), on demand, beyond free tiers',
  sqsPerMillionRequests: 0.4,
  dynamoWritePerMillionWru: 0.625,
  dynamoReadPerMillionRru: 0.125,
  sfnStandardPerMillionTransitions: 25,
  sfnExpressPerMillionRequests: 1,
  /** $0.06 per GB-hour, the first 1,000 GB-hours of a month. */
  sfnExpressPerGbSecond: 0.06 / 3600,
  /** Express bills memory in 64 MB chunks: 50 MB + the definition + the payload fit one. */
  sfnExpressMemoryGb: 64 / 1024,
  lambdaPerMillionRequests: 0.2,
  lambdaArm64PerGbSecond: 0.0000133334,
  cloudwatchPerThousandMetricsRequested: 0.01,
  /** Standard log class; Lambda's logs are billed at this rate for their first 10 TB a month. */
  cloudwatchLogsPerGbIngested: 0.5,
  cloudflareQueuesPerMillionMessages: 1.2,
  /** Not a price: each Host function's memory as deployed, which its GB-seconds are billed at. */
  lambdaMemoryMb: HOST_FUNCTION_MEMORY_MB,
} as const;

/** A GB of logs taken as 2^30 bytes, as a GB of a function's memory is. */
const BYTES_PER_GB = 1024 ** 3;

export const PRICE_SOURCES: { item: string; price: string; source: string }[] = [
  {
    item: 'SQS standard requests',
    price: '$0.40 per million requests (each 64 KB chunk of a payload is one request)',
    source:
      'https://aws.amazon.com/sqs/pricing/ as summarised for us-east-1 by https://cloudburn.io/blog/amazon-sqs-pricing (Mar 2026) and https://www.factualminds.com/blog/amazon-sqs-pricing-64kb-rule-fifo-vs-standard/',
  },
  {
    item: 'DynamoDB on-demand',
    price:
      '$0.625 per million write request units, $0.125 per million read request units (after the 50 % cut of 1 Nov 2024); a strongly consistent read ≤4 KB = 1 RRU, a write ≤1 KB = 1 WRU, transactional ×2',
    source:
      'https://aws.amazon.com/dynamodb/pricing/on-demand/ (unit definitions); prices as listed for US East at https://airbyte.com/data-engineering-resources/dynamodb-pricing',
  },
  {
    item: 'Step Functions Standard',
    price: '$0.0250 per 1,000 state transitions in US East (N. Virginia), retries included',
    source: 'https://aws.amazon.com/step-functions/pricing/',
  },
  {
    item: 'Step Functions Express',
    price:
      '$1.00 per million requests (executions started); $0.06 per GB-hour of duration (first 1,000 GB-hours a month), rounded up to 100 ms, memory billed in 64 MB chunks (50 MB + definition + payload: one chunk for a lane)',
    source: 'https://aws.amazon.com/step-functions/pricing/',
  },
  {
    item: 'Lambda (arm64)',
    price: '$0.20 per million requests; $0.0000133334 per GB-second, billed per 1 ms',
    source:
      'https://aws.amazon.com/lambda/pricing/ as listed for US East at https://cloudchipr.com/blog/aws-lambda-pricing (first 7.5 billion GB-s per month)',
  },
  {
    item: 'CloudWatch GetMetricData',
    price: '$0.01 per 1,000 metrics requested',
    source:
      'https://aws.amazon.com/cloudwatch/pricing/ as applied at https://support.site24x7.com/portal/en/kb/articles/aws-cloudwatch-metrics-cost-calculation',
  },
  {
    item: 'CloudWatch Logs ingestion',
    price:
      "$0.50 per GB ingested (Standard log class); Lambda's logs since May 2025 at the vended-logs tiers, whose first 10 TB a month cost the same",
    source:
      'https://aws.amazon.com/cloudwatch/pricing/ as listed for us-east-1 at https://c3x.dev/blog/cloudwatch-logs-cost-optimization and https://hykell.com/knowledge-base/aws-cloudwatch-logs-pricing; the Lambda tiers at https://www.duckbillgroup.com/?p=9080',
  },
  {
    item: 'Cloudflare Queues',
    price:
      '$0.40 per million operations; 3 operations (write, read, delete) per message ≤64 KB = $1.20 per million messages',
    source: 'https://developers.cloudflare.com/queues/pricing/',
  },
];

export interface CostBreakdown {
  sqs: number;
  dynamoWrites: number;
  dynamoReads: number;
  stepFunctions: number;
  lambdaRequests: number;
  lambdaDuration: number;
  cloudwatch: number;
  logs: number;
  total: number;
}

/** A Lambda role's memory in GB: its function's, as deployed (throws for a role of no known function). */
export const memoryGbOf = (role: string): number => PRICES.lambdaMemoryMb[hostFunctionOf(role)] / 1024;

/** Lambda invocations and billed GB-seconds of a tally, each role at its function's memory. */
export function lambdaUsage(t: Tally) {
  let invocations = 0;
  let gbSeconds = 0;
  for (const [role, l] of Object.entries(t.lambda)) {
    invocations += l.invocations;
    gbSeconds += (l.billedMs / 1000) * memoryGbOf(role);
  }
  return { invocations, gbSeconds };
}

/** Bytes of log lines the tally counted in the contexts `keep` accepts. */
export const logBytesOf = (t: Tally, keep: (context: string) => boolean): number =>
  Object.entries(t.logs ?? {}).reduce((a, [context, bytes]) => a + (keep(context) ? bytes : 0), 0);

/** State transitions of every lane (Standard and Express), as the Host's work per batch. */
export const transitionsOf = (t: Tally) => Object.values(t.transitions).reduce((a, n) => a + n, 0);

/** USD of the lanes' executions: Standard per transition, Express per request and duration. */
export function stepFunctionsUsd(t: Tally): number {
  const x = t.express ?? { executions: 0, transitions: 0, billedMs: 0 };
  const standard = (transitionsOf(t) - x.transitions) * PRICES.sfnStandardPerMillionTransitions;
  const requests = x.executions * PRICES.sfnExpressPerMillionRequests;
  const duration = (x.billedMs / 1000) * PRICES.sfnExpressMemoryGb * PRICES.sfnExpressPerGbSecond * 1e6;
  return (standard + requests + duration) / 1e6;
}

/**
 * USD of everything a tally counted in the contexts `keep` accepts. Writes refused by a condition
 * are billed by AWS (1 WRU for a small item) but not reported by DynamoDB Local: they are added
 * at 1 WRU each. CloudWatch metrics are the SDK calls counted under `CloudWatch:GetMetricData`
 * times `metricsPerRequest`. Lambda time is priced for every role; log lines, like SDK calls, only
 * in the contexts `keep` accepts.
 */
export function usd(t: Tally, keep: (context: string) => boolean, metricsPerRequest = 1): CostBreakdown {
  const s = sumSdk(t, keep);
  const lambda = lambdaUsage(t);
  const cwRequests = s.byOp['CloudWatch:GetMetricData']?.calls ?? 0;
  const b = {
    sqs: (s.sqsRequests * PRICES.sqsPerMillionRequests) / 1e6,
    dynamoWrites: ((s.wru + s.refusedWrites) * PRICES.dynamoWritePerMillionWru) / 1e6,
    dynamoReads: (s.rru * PRICES.dynamoReadPerMillionRru) / 1e6,
    stepFunctions: stepFunctionsUsd(t),
    lambdaRequests: (lambda.invocations * PRICES.lambdaPerMillionRequests) / 1e6,
    lambdaDuration: lambda.gbSeconds * PRICES.lambdaArm64PerGbSecond,
    cloudwatch: (cwRequests * metricsPerRequest * PRICES.cloudwatchPerThousandMetricsRequested) / 1000,
    logs: (logBytesOf(t, keep) / BYTES_PER_GB) * PRICES.cloudwatchLogsPerGbIngested,
  };
  return { ...b, total: Object.values(b).reduce((a, v) => a + v, 0) };
}

/** A breakdown scaled by `factor` (e.g. per message × 1e6). */
export const scale = (b: CostBreakdown, factor: number): CostBreakdown =>
  Object.fromEntries(Object.entries(b).map(([k, v]) => [k, v * factor])) as unknown as CostBreakdown;
