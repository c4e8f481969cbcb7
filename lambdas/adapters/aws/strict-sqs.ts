/**
 * SQS's size limits, enforced on the client for the local stand-in, which does not enforce them:
 * fauxqs's default `MaximumMessageSize` is 1 MiB and it never checks a batch's total. AWS refuses
 * these requests, so the local Host must too, or code that only works locally ships.
 *
 * 262,144 bytes is what a queue of this Host accepts: it is the default of the queue attribute
 * `MaximumMessageSize`, which this Host never raises (the API itself now allows up to 1 MiB on
 * queues configured for it). SQS counts a message as its body plus its message attributes (each
 * attribute's name, data type and value); a SendMessageBatch is limited to the same total over
 * all of its entries.
 *
 * - SendMessage over the limit → `InvalidParameterValue` ("Message must be shorter than …").
 * - SendMessageBatch whose entries together exceed it → `BatchRequestTooLong`.
 *
 * Both are thrown before the request is sent, as the errors SQS answers with (400, client fault),
 * so nothing reaches the queue and the SDK does not retry them.
 */

import type { MessageAttributeValue, SendMessageBatchRequestEntry, SQSClient } from '@aws-sdk/client-sqs';
import { BatchRequestTooLong, SQSServiceException } from '@aws-sdk/client-sqs';

/** The default (and this Host's) `MaximumMessageSize`, per message and per batch request. */
export const SQS_MAX_MESSAGE_BYTES = 262_144;

const utf8 = (s: string | undefined) => (s === undefined ? 0 : Buffer.byteLength(s, 'utf8'));

function attributeBytes(attrs: Record<string, MessageAttributeValue> | undefined): number {
  let total = 0;
  for (const [name, v] of Object.entries(attrs ?? {})) {
    total += utf8(name) + utf8(v.DataType);
    if (v.StringValue !== undefined) total += utf8(v.StringValue);
    if (v.BinaryValue !== undefined) total += v.BinaryValue.byteLength;
  }
  return total;
}

/** The size SQS charges against `MaximumMessageSize`: body plus message attributes. */
export function sqsMessageBytes(
  body: string | undefined,
  attrs?: Record<string, MessageAttributeValue>,
): number {
  return utf8(body) + attributeBytes(attrs);
}

const metadata = () => ({ httpStatusCode: 400, requestId: 'takoform-strict-sqs' });

interface Args {
  input: Record<string, unknown>;
}
type Handler = (args: Args) => Promise<unknown>;
type Middleware = (next: Handler, context: { commandName?: string }) => Handler;

const strictSizes: Middleware = (next, context) => async (args) => {
  if (context.commandName === 'SendMessageCommand') {
    const size = sqsMessageBytes(
      args.input.MessageBody as string | undefined,
      args.input.MessageAttributes as Record<string, MessageAttributeValue> | undefined,
    );
    if (size > SQS_MAX_MESSAGE_BYTES)
      throw new SQSServiceException({
        name: 'InvalidParameterValue',
        $fault: 'client',
        message: `One or more parameters are invalid. Reason: Message must be shorter than ${SQS_MAX_MESSAGE_BYTES} bytes.`,
        $metadata: metadata(),
      });
  } else if (context.commandName === 'SendMessageBatchCommand') {
    const entries = (args.input.Entries ?? []) as SendMessageBatchRequestEntry[];
    const size = entries.reduce((sum, e) => sum + sqsMessageBytes(e.MessageBody, e.MessageAttributes), 0);
    if (size > SQS_MAX_MESSAGE_BYTES)
      throw new BatchRequestTooLong({
        message: `Batch requests cannot be longer than ${SQS_MAX_MESSAGE_BYTES} bytes. You have sent ${size} bytes.`,
        $metadata: metadata(),
      });
  }
  return next(args);
};

const applied = new WeakSet<object>();

/** Makes `client` refuse what SQS refuses for size (see above); applying it twice is a no-op. */
export function withStrictSqsLimits<C extends Pick<SQSClient, 'middlewareStack'>>(client: C): C {
  if (applied.has(client)) return client;
  applied.add(client);
  (client.middlewareStack as unknown as { add(m: Middleware, o: Record<string, unknown>): void }).add(
    strictSizes,
    { name: 'takoformStrictSqsLimits', step: 'initialize', priority: 'high', override: true },
  );
  return client;
}
