/**
 * The SDK clients of the local Host and the tests: the Host's own (adapters/aws/clients.ts) with
 * the faults TAKOFORM_FAULTS configures for their service, or untouched without it.
 */
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { LambdaClient } from '@aws-sdk/client-lambda';
import type { SQSClient } from '@aws-sdk/client-sqs';
import { dynamoDbClient, lambdaClient, sqsClient } from '../../adapters/aws/clients.ts';
import { withFaults } from './sdk-faults.ts';

export function localDynamoDbClient(endpoint?: string): DynamoDBClient {
  return withFaults(dynamoDbClient(endpoint), 'dynamodb');
}

export function localSqsClient(endpoint?: string): SQSClient {
  return withFaults(sqsClient(endpoint), 'sqs');
}

export function localLambdaClient(endpoint?: string): LambdaClient {
  return withFaults(lambdaClient(endpoint), 'lambda');
}
