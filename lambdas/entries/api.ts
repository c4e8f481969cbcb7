/**
 * Lambda entry for Host API v2 (and the `/ext/…` producer routes) behind API Gateway. The Host is
 * composed once per cold start (composition/aws-host.ts); after an acceptance the executor is
 * triggered asynchronously, and the response waits (briefly) for that invoke to be sent.
 */
import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import middy from '@middy/core';
import type { APIGatewayProxyEvent, APIGatewayProxyResult } from 'aws-lambda';
import { type AwsHost, awsHostFromEnv } from '../composition/aws-host.ts';
import { logThroughPowertools, observability } from '../composition/aws-observability.ts';
import { apiGatewayAdapter } from '../http/api-gateway.ts';
import { log } from '../shared/log.ts';

const obs = observability('takoform-api');

/** The API handler over a composed Host (also what the tests drive). */
export function createApiHandler(host: AwsHost) {
  const core = apiGatewayAdapter(host.host.http);
  return async (event: APIGatewayProxyEvent): Promise<APIGatewayProxyResult> => {
    const out = await core(event);
    await host.flushBackground();
    return out;
  };
}

let ready: Promise<ReturnType<typeof createApiHandler>> | undefined;

export const handler = middy<APIGatewayProxyEvent, APIGatewayProxyResult>()
  .use(injectLambdaContext(obs.logger))
  .handler(async (event) => {
    ready ??= awsHostFromEnv({
      onAccepted: (operationId) => log.info('operation accepted', { operationId }),
    }).then((host) => {
      logThroughPowertools(obs);
      return createApiHandler(host);
    });
    return (await ready)(event);
  });
