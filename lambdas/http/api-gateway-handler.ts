/** Lambda entry for Host API v2 behind API Gateway. Composition lives in the runtime module. */
import middy from '@middy/core';
import type { APIGatewayProxyEvent, APIGatewayProxyResult } from 'aws-lambda';
import { apiGatewayAdapter } from './api-gateway.ts';
import { createHttpHandler } from './handler.ts';
import { parsePublicOrigin } from './origin.ts';

const origin = parsePublicOrigin(process.env.TAKOFORM_PUBLIC_ORIGIN ?? 'https://localhost');

export const handler = middy<APIGatewayProxyEvent, APIGatewayProxyResult>().handler(
  apiGatewayAdapter(createHttpHandler({ origin })),
);
