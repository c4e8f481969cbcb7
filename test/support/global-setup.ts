import type { TestProject } from 'vitest/node';
import type { StandIn } from '../../lambdas/local/standins/child-process.ts';
import { startDynamoDbLocal } from '../../lambdas/local/standins/dynamodb-local.ts';
import { startSqsServer } from '../../lambdas/local/standins/sqs-server.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    ddbEndpoint: string;
    sqsEndpoint: string;
  }
}

/**
 * One in-memory DynamoDB Local and one SQS stand-in, shared by every integration test file. With
 * TAKOFORM_LOCALSTACK_ENDPOINT set (e.g. http://localhost.localstack.cloud:4566), the suite runs
 * against that LocalStack instead and starts no stand-ins (OPS-03).
 */
export default async function setup(project: TestProject) {
  const localstack = process.env.TAKOFORM_LOCALSTACK_ENDPOINT;
  if (localstack) {
    project.provide('ddbEndpoint', localstack);
    project.provide('sqsEndpoint', localstack);
    process.stdout.write(`[integration] backend: LocalStack at ${localstack}\n`);
    return async () => {};
  }
  const started: StandIn[] = [];
  try {
    const [ddb, sqs] = await Promise.all([startDynamoDbLocal(), startSqsServer()]);
    started.push(ddb, sqs);
    project.provide('ddbEndpoint', ddb.endpoint);
    project.provide('sqsEndpoint', sqs.endpoint);
    process.stdout.write('[integration] backend: local stand-ins (DynamoDB Local, fauxqs)\n');
  } catch (err) {
    await Promise.all(started.map((s) => s.stop()));
    throw err;
  }
  return async () => {
    await Promise.all(started.map((s) => s.stop()));
  };
}
