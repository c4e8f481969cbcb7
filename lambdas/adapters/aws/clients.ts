import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { LambdaClient } from '@aws-sdk/client-lambda';
import { SQSClient } from '@aws-sdk/client-sqs';
import { withCallRecorder } from './call-recorder.ts';
import { withFaults } from './fault-injection.ts';
import { withStrictSqsLimits } from './strict-sqs.ts';

/** Endpoints of local stand-ins; on AWS both are undefined and the SDK's defaults apply. */
export interface AwsEndpoints {
  dynamodb?: string;
  sqs?: string;
}

const LOCAL_CREDENTIALS = { accessKeyId: 'local', secretAccessKey: 'local' };

/**
 * Every client below gets fault injection when `TAKOFORM_FAULTS` is set (see fault-injection.ts);
 * without it nothing is added. A malformed value throws here, at composition. With a test's call
 * recorder installed (call-recorder.ts), each also reports its calls.
 */
export function dynamoDbClient(endpoint?: string): DynamoDBClient {
  const client = endpoint
    ? new DynamoDBClient({ endpoint, region: 'us-east-1', credentials: LOCAL_CREDENTIALS, maxAttempts: 3 })
    : new DynamoDBClient({});
  return withCallRecorder(withFaults(client, 'dynamodb'), 'dynamodb');
}

/** With an endpoint (the local stand-in), also refuses what SQS refuses for size (strict-sqs.ts). */
export function sqsClient(endpoint?: string): SQSClient {
  const client = endpoint
    ? withStrictSqsLimits(
        new SQSClient({
          endpoint,
          region: 'us-east-1',
          credentials: LOCAL_CREDENTIALS,
          // Local queue URLs name the stand-in's own address; send every call to the endpoint.
          useQueueUrlAsEndpoint: false,
          maxAttempts: 3,
        }),
      )
    : new SQSClient({});
  return withCallRecorder(withFaults(client, 'sqs'), 'sqs');
}

/** A Lambda client (for invoking functions), with faults when `TAKOFORM_FAULTS` configures `lambda`. */
export function lambdaClient(endpoint?: string): LambdaClient {
  const client = endpoint
    ? new LambdaClient({ endpoint, region: 'us-east-1', credentials: LOCAL_CREDENTIALS, maxAttempts: 3 })
    : new LambdaClient({});
  return withCallRecorder(withFaults(client, 'lambda'), 'lambda');
}
