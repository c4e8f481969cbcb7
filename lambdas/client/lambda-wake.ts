import { InvokeCommand, type LambdaClient } from '@aws-sdk/client-lambda';
import type { WakeRequest } from '../delivery/wake-request.ts';

/** Tells the Host that SQS accepted a send (the producer client's `wake`). */
export type QueueWake = (request: WakeRequest) => Promise<void>;

/**
 * The Host's wake function, invoked asynchronously (`InvocationType: 'Event'`: the send does not
 * wait for the lane's start, only for Lambda to queue the event). The name is the Host's
 * `wakeFunctionName`; `grantProduce` grants `lambda:InvokeFunction` on it.
 */
export function lambdaWake(lambda: Pick<LambdaClient, 'send'>, functionName: string): QueueWake {
  if (typeof functionName !== 'string' || functionName === '')
    throw new TypeError('functionName is required');
  return async (request) => {
    await lambda.send(
      new InvokeCommand({
        FunctionName: functionName,
        InvocationType: 'Event',
        Payload: new TextEncoder().encode(JSON.stringify(request)),
      }),
    );
  };
}
