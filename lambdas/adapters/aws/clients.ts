import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { LambdaClient } from '@aws-sdk/client-lambda';
import { SQSClient } from '@aws-sdk/client-sqs';
import { withCallRecorder } from './call-recorder.ts';
import { withStrictSqsLimits } from './strict-sqs.ts';

/** Endpoints of local stand-ins; on AWS both are undefined and the SDK's defaults apply. */
export interface AwsEndpoints {
  dynamodb?: string;
  sqs?: string;
}

const LOCAL_CREDENTIALS = { accessKeyId: 'local', secretAccessKey: 'local' };

/**
 * The Host's SDK clients: with an endpoint, a local stand-in's; without, the runtime's defaults.
 * With a test's call recorder installed (call-recorder.ts), each also reports its calls. Fault
 * injection is added by the local Host and the tests (local/faults/), never here.
 */
export function dynamoDbClient(endpoint?: string): DynamoDBClient {
  const client = endpoint
    ? new DynamoDBClient({ endpoint, region: 'us-east-1', credentials: LOCAL_CREDENTIALS, maxAttempts: 3 })
    : new DynamoDBClient({});
  return withCallRecorder(client, 'dynamodb');
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
  return withCallRecorder(client, 'sqs');
}

/** A Lambda client (for invoking functions). */
export function lambdaClient(endpoint?: string): LambdaClient {
  const client = endpoint
    ? new LambdaClient({ endpoint, region: 'us-east-1', credentials: LOCAL_CREDENTIALS, maxAttempts: 3 })
    : new LambdaClient({});
  return withCallRecorder(client, 'lambda');
}
