/**
 * Runs the traffic-shape cases against the bench's stand-ins: the two episodes side by side (they
 * mostly wait), then each stream alone (the fast ones keep the machine busy). A case that fails
 * is recorded and the run goes on.
 */
import { fmt } from '../format.ts';
import { hostSteady } from '../scenarios/steady.ts';
import { episodeRun } from '../scenarios/trickle.ts';
import { warmThreads, workerFile } from '../support/bench-host.ts';
import type { Endpoints } from '../support/standins.ts';
import { STEADY_WORKER } from '../support/workers.ts';
import type { ShapesConfig, ShapesSamples } from './model.ts';

type Log = (msg: string) => void;

export async function measureShapes(
  config: ShapesConfig,
  endpoints: Endpoints,
  log: Log,
): Promise<ShapesSamples> {
  const out: ShapesSamples = { config, streams: [], errors: [] };
  const attempt = async <T>(scenario: string, fn: () => Promise<T>): Promise<T | undefined> => {
    try {
      return await fn();
    } catch (err) {
      const error = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
      out.errors.push({ scenario, error });
      log(`${scenario} failed: ${error}`);
      return undefined;
    }
  };
  // One thread per slot and one per episode, started before anything is counted.
  await warmThreads(workerFile(STEADY_WORKER), config.consumer.maxConcurrency + 2);
  const episode = (messages: number, gapSeconds: number) =>
    episodeRun(endpoints, {
      settings: config.consumer,
      idleWaitSeconds: config.idleWaitSeconds,
      messages,
      gapSeconds,
      timeoutMs: config.tailTimeoutMs,
    });
  log(`shapes: an isolated message and a kept-alive lane (idle wait ${config.idleWaitSeconds} s)`);
  const [isolated, keptAlive, straight] = await Promise.all([
    attempt('shapes: isolated message', () => episode(1, 0)),
    attempt('shapes: kept-alive lane', () => episode(config.keptAlive.messages, config.keptAlive.gapSeconds)),
    // Waits for the supervisor's next round (a minute), beside the others.
    attempt('shapes: straight to SQS', () =>
      episodeRun(endpoints, {
        settings: config.consumer,
        idleWaitSeconds: config.idleWaitSeconds,
        messages: 1,
        gapSeconds: 0,
        timeoutMs: config.tailTimeoutMs + 90_000,
        straightToSqs: true,
      }),
    ),
  ]);
  for (const [name, e] of [
    ['isolated message', isolated],
    ['kept-alive lane', keptAlive],
    ['straight to SQS', straight],
  ] as const)
    if (e)
      log(
        `shapes ${name}: ${e.ok ? 'done' : 'NOT done'} in ${fmt(e.seconds, 1)} s, ${e.tally.executions} lane(s)`,
      );
  if (isolated) out.isolated = isolated;
  if (keptAlive) out.keptAlive = keptAlive;
  if (straight) out.straight = straight;
  const { maxBatchSize, maxBatchTimeoutSeconds, maxConcurrency } = config.consumer;
  for (const rate of config.streamRates) {
    const host = await attempt(`shapes: stream ${rate}/s`, () =>
      hostSteady(
        endpoints,
        { rate, batchSize: maxBatchSize, concurrency: maxConcurrency, maxBatchTimeoutSeconds },
        config.timing,
        {
          idleWaitSeconds: config.idleWaitSeconds,
          sendEachMessage: true,
          cutDurations: true,
          tailTimeoutMs: config.tailTimeoutMs,
          quietStart: true,
        },
      ),
    );
    if (!host) continue;
    out.streams.push({ rate, host });
    log(
      `shapes stream ${rate}/s: ${host.ok ? 'done' : 'NOT done'}, sent ${fmt((host.sentInWindow ?? 0) / host.windowSeconds, 1)}/s,` +
        ` handled ${fmt(host.perSecond, 1)}/s in ${host.batches} batches, producer lag ≤ ${fmt(host.producer.maxLagMs, 0)} ms`,
    );
  }
  return out;
}
