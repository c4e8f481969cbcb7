/**
 * Lambda entry of the dispatcher's Host steps (`AcquireSlot`, `RecoverBatch`, `HandOver`): the
 * state machine invokes it with `{action, consumerUid, …}` and reads the result from `$.Payload`.
 * The control loop decides; this only validates and logs.
 */
import type { Context } from 'aws-lambda';
import { z } from 'zod';
import { type AwsHost, awsHostFromEnv } from '../composition/aws-host.ts';
import { logThroughPowertools, observability } from '../composition/aws-observability.ts';
import { inheritedLaneSchema } from '../delivery/batch-host-protocol.ts';
import { log } from '../shared/log.ts';

const uid = z.string().min(1).max(128);
// The starting lane's sealed context (its seal is checked by the service), or {}.
const inherit = z.union([z.strictObject({}), inheritedLaneSchema]).optional();
const stepInput = z.union([
  z.strictObject({
    action: z.literal('acquire'),
    // The lane's whole state (`lane.$: '$'`): only these fields are read; the rest (the last
    // round's answers) is the state machine's own and is dropped here.
    lane: z.object({
      consumerUid: uid,
      generation: z.number().int().nonnegative(),
      round: z.number().int().nonnegative().max(1_000).optional(),
      // WAKE_LATER_MAX_SECONDS at most; AWS bounds a Wait state by the execution anyway.
      startAfter: z.number().int().nonnegative().max(86_400).optional(),
      inherit,
    }),
    // An Express lane's execution start (`$$.Execution.StartTime`, ISO 8601).
    startedAt: z.string().min(1).max(64).optional(),
    // The execution (`$$.Execution`): a retried AcquireSlot of a round asks for the same slot.
    execution: z
      .strictObject({ id: z.string().min(1).max(2_048), startTime: z.string().min(1).max(64).optional() })
      .optional(),
  }),
  // From an execution of the definition before `lane` (running through a deploy).
  z.strictObject({
    action: z.literal('acquire'),
    consumerUid: uid,
    generation: z.number().int().nonnegative(),
    inherit,
  }),
  z.strictObject({
    action: z.literal('recover'),
    consumerUid: uid,
    batchId: z.string().min(1).max(256),
    // The Catch's output of the failed InvokeWorker (Step Functions bounds Cause to 32 KiB).
    failure: z
      .object({ Error: z.string().max(256).optional(), Cause: z.string().max(32_768).optional() })
      .optional(),
    express: z.strictObject({ generation: z.number().int().nonnegative() }).optional(),
  }),
  z.strictObject({
    action: z.literal('handover'),
    consumerUid: uid,
    generation: z.number().int().nonnegative(),
  }),
]);

const obs = observability('takoform-dispatcher-step');

export function createDispatcherStepHandler(host: AwsHost) {
  return async (event: unknown) => {
    const input = stepInput.parse(event);
    const consumerUid = 'lane' in input ? input.lane.consumerUid : input.consumerUid;
    return log.withKeys(
      { consumerUid, ...(input.action === 'recover' ? { batchId: input.batchId } : {}) },
      async () => {
        const result = await host.host.loop.step(input);
        const batchId =
          'slot' in result ? result.slot.batchId : input.action === 'recover' ? input.batchId : undefined;
        log.info('dispatcher step', {
          action: input.action,
          consumerUid,
          ...('status' in result ? { status: result.status } : {}),
          ...('waitSeconds' in result ? { waitSeconds: result.waitSeconds } : {}),
          ...('handedOver' in result ? { handedOver: result.handedOver } : {}),
          ...(batchId ? { batchId } : {}),
        });
        return result;
      },
    );
  };
}

let ready: Promise<ReturnType<typeof createDispatcherStepHandler>> | undefined;

export const handler = async (event: unknown, context: Context) => {
  obs.logger.addContext(context);
  ready ??= awsHostFromEnv().then((host) => {
    logThroughPowertools(obs);
    return createDispatcherStepHandler(host);
  });
  return (await ready)(event);
};
