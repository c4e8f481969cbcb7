import type { TestProject } from 'vitest/node';
import { startDynamoDbPhysicsProxy } from '../../lambdas/local/physics/dynamodb-physics-proxy.ts';
import { physicsFromEnv } from '../../lambdas/local/physics/physics-config.ts';
import type { StandIn } from '../../lambdas/local/standins/child-process.ts';
import { startDynamoDbLocal } from '../../lambdas/local/standins/dynamodb-local.ts';
import { startSqsServer } from '../../lambdas/local/standins/sqs-server.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    ddbEndpoint: string;
    sqsEndpoint: string;
    /** The stand-ins this setup started (name and PID); none in single-endpoint mode. */
    standIns: { name: string; pid: number }[];
  }
}

/**
 * One in-memory DynamoDB Local and one SQS stand-in, shared by every integration test file. With
 * TAKOFORM_LOCALSTACK_ENDPOINT set (LocalStack, e.g. http://localhost.localstack.cloud:4566, or
 * moto_server through `npm run test:moto`), the suite runs against that one endpoint instead and
 * starts no stand-ins (OPS-03). With TAKOFORM_PHYSICS set, DynamoDB is reached through the physics
 * proxy either way (startDynamoDbLocal puts it in front of DynamoDB Local; here, of the endpoint).
 */
export default async function setup(project: TestProject) {
  const single = process.env.TAKOFORM_LOCALSTACK_ENDPOINT;
  if (single) {
    const physics = physicsFromEnv();
    const proxy = physics ? await startDynamoDbPhysicsProxy({ target: single, physics }) : undefined;
    project.provide('ddbEndpoint', proxy?.endpoint ?? single);
    project.provide('sqsEndpoint', single);
    project.provide('standIns', []);
    const emulator = process.env.TAKOFORM_ENDPOINT_EMULATOR ?? 'LocalStack';
    process.stdout.write(`[integration] backend: ${emulator} at ${single} (single endpoint)\n`);
    return async () => {
      await proxy?.stop();
    };
  }
  const started: StandIn[] = [];
  try {
    const [ddb, sqs] = await Promise.all([startDynamoDbLocal(), startSqsServer()]);
    started.push(ddb, sqs);
    project.provide('ddbEndpoint', ddb.endpoint);
    project.provide('sqsEndpoint', sqs.endpoint);
    project.provide(
      'standIns',
      started.map((s) => ({ name: s.name, pid: s.pid })),
    );
    process.stdout.write('[integration] backend: local stand-ins (DynamoDB Local, fauxqs)\n');
  } catch (err) {
    await Promise.all(started.map((s) => s.stop()));
    throw err;
  }
  return async () => {
    await Promise.all(started.map((s) => s.stop()));
  };
}
