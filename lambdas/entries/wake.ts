/**
 * Lambda entry that wakes a queue's consumer for producers outside the Host: the producer client
 * with `wake` (`lambdas/client/lambda-wake.ts`) invokes it asynchronously after each accepted send,
 * as a send through the Host wakes by itself. It takes no credential and can do nothing else:
 * count a wake and start a lane if none is receiving (or one for when delayed messages become
 * visible) — what the producer's own `sqs:SendMessage` could cause anyway, a minute later,
 * through the supervisor. A request it refuses is dropped, not retried.
 */
import type { Context } from 'aws-lambda';
import { awsHostFromEnv } from '../composition/aws-host.ts';
import { logThroughPowertools, observability } from '../composition/aws-observability.ts';
import type { ControlLoop } from '../delivery/control-loop.ts';
import { queueUidOf, wakeRequestSchema } from '../delivery/wake-request.ts';
import { log } from '../shared/log.ts';

const obs = observability('takoform-wake');

export function createWakeHandler(host: { queueNamePrefix: string; loop: Pick<ControlLoop, 'wake'> }) {
  return async (event: unknown): Promise<{ woken: boolean }> => {
    const parsed = wakeRequestSchema.safeParse(event);
    if (!parsed.success) {
      log.warn('wake request refused: not {queue, now, later}', {
        issues: parsed.error.issues.slice(0, 3).map((i) => `${i.path.join('.')}: ${i.message}`),
      });
      return { woken: false };
    }
    const { queue, now, later } = parsed.data;
    const queueUid = queueUidOf(queue, host.queueNamePrefix);
    if (!queueUid) {
      log.warn('wake request refused: not a queue of this Host', { queue });
      return { woken: false };
    }
    // Never throws: a wake that fails leaves the messages to the supervisor's round.
    await host.loop.wake(queueUid, later, now);
    return { woken: true };
  };
}

let ready: Promise<ReturnType<typeof createWakeHandler>> | undefined;

export const handler = async (event: unknown, context: Context) => {
  obs.logger.addContext(context);
  ready ??= awsHostFromEnv().then((host) => {
    logThroughPowertools(obs);
    return createWakeHandler({ queueNamePrefix: host.config.queueNamePrefix, loop: host.host.loop });
  });
  return (await ready)(event);
};
