import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { SQSClient } from '@aws-sdk/client-sqs';

/** Endpoints of local stand-ins; on AWS both are undefined and the SDK's defaults apply. */
export interface AwsEndpoints {
  dynamodb?: string;
  sqs?: string;
}

const LOCAL_CREDENTIALS = { accessKeyId: 'local', secretAccessKey: 'local' };

export function dynamoDbClient(endpoint?: string): DynamoDBClient {
  return endpoint
    ? new DynamoDBClient({ endpoint, region: 'us-east-1', credentials: LOCAL_CREDENTIALS, maxAttempts: 3 })
    : new DynamoDBClient({});
}

export function sqsClient(endpoint?: string): SQSClient {
  return endpoint
    ? new SQSClient({
        endpoint,
        region: 'us-east-1',
        credentials: LOCAL_CREDENTIALS,
        // Local queue URLs name the stand-in's own address; send every call to the endpoint.
        useQueueUrlAsEndpoint: false,
        maxAttempts: 3,
      })
    : new SQSClient({});
}
