/**
 * Lambda entry of the dispatcher's Host steps (`AcquireSlot`, `RecoverBatch`): the state machine
 * invokes it with `{action, consumerUid, …}` and reads the result from `$.Payload`.
 */
import type { Context } from 'aws-lambda';
import { z } from 'zod';
import { type AwsHost, awsHostFromEnv } from '../runtime/aws-host.ts';
import { observability } from '../runtime/aws-observability.ts';
import { dispatcherStep } from './dispatcher-steps.ts';

const uid = z.string().min(1).max(128);
const stepInput = z.discriminatedUnion('action', [
  z.strictObject({
    action: z.literal('acquire'),
    consumerUid: uid,
    generation: z.number().int().nonnegative(),
  }),
  z.strictObject({ action: z.literal('recover'), consumerUid: uid, batchId: z.string().min(1).max(256) }),
]);

const obs = observability('takoform-dispatcher-step');

export function createDispatcherStepHandler(host: AwsHost) {
  return async (event: unknown) => {
    const input = stepInput.parse(event);
    const result = await dispatcherStep(host.host.delivery, input);
    const batchId =
      'slot' in result ? result.slot.batchId : input.action === 'recover' ? input.batchId : undefined;
    obs.logger.info('dispatcher step', {
      action: input.action,
      consumerUid: input.consumerUid,
      status: 'status' in result ? result.status : 'recovered',
      ...(batchId ? { batchId } : {}),
    });
    return result;
  };
}

let ready: Promise<ReturnType<typeof createDispatcherStepHandler>> | undefined;

export const handler = async (event: unknown, context: Context) => {
  obs.logger.addContext(context);
  ready ??= awsHostFromEnv().then(createDispatcherStepHandler);
  return (await ready)(event);
};
