/**
 * Arrivals too sparse for a stream the bench could wait out (one every 10 s, one a minute): the
 * episodes their cost is composed of, each measured whole on a Host of its own, with the idle
 * wait the Host has on AWS.
 *
 * - An isolated message: sent through the Host to a consumer with no lane, it wakes one, which
 *   gathers it for the batch timeout, runs it, and ends once its idle wait brings nothing.
 * - A kept-alive lane: `messages` sent `gapSeconds` apart, each arriving while the lane long-polls
 *   in its idle wait after the one before, counted until the lane ends.
 *
 * Each is counted from the first send until every lane has ended, so that the Express execution
 * and the last worker invocation, billed at their end, fall inside it.
 */
import { type ConsumerSettings, createBenchHost, FIRST_ROUND_MS, recordFile } from '../support/bench-host.ts';
import { attribute, Meter, type Tally } from '../support/meter.ts';
import type { Endpoints } from '../support/standins.ts';
import { readRecords, sleep, until } from '../support/stats.ts';
import { STEADY_WORKER } from '../support/workers.ts';

export interface EpisodeSample {
  ok: boolean;
  messages: number;
  gapSeconds: number;
  /** From the first send until every lane had ended. */
  seconds: number;
  tally: Tally;
  /** Each handler's own work, ms. */
  handlerMs: number[];
}

export interface EpisodeOptions {
  settings: ConsumerSettings;
  idleWaitSeconds: number;
  messages: number;
  gapSeconds: number;
  /** For the deliveries, and then again for the lanes' ends. */
  timeoutMs: number;
}

export async function episodeRun(endpoints: Endpoints, o: EpisodeOptions): Promise<EpisodeSample> {
  const meter = new Meter();
  const bench = await createBenchHost(endpoints, { meter, idleWaitSeconds: o.idleWaitSeconds });
  const records = recordFile('episode');
  try {
    const { queue } = await bench.setupConsumer('episode', STEADY_WORKER, o.settings, { RECORDS: records });
    let handled = 0;
    bench.onFinalized((n) => {
      handled += n;
    });
    // No supervisor round within the episode: each lane is started by a send, as a trickle
    // through the Host starts it on AWS.
    const dispatcher = bench.startDispatcher({ idleWaitSeconds: o.idleWaitSeconds, supervisorMs: 3_600_000 });
    await sleep(FIRST_ROUND_MS);
    const body = new Uint8Array(64).fill(97);
    meter.reset();
    const t0 = performance.now();
    for (let i = 0; i < o.messages; i++) {
      await sleep(Math.max(0, t0 + i * o.gapSeconds * 1000 - performance.now()));
      await attribute('producer', () => bench.host.producer.send(queue, body));
    }
    const delivered = await until(() => handled >= o.messages, o.timeoutMs, 20);
    const ended = delivered && (await until(() => dispatcher.running().length === 0, o.timeoutMs, 20));
    const seconds = (performance.now() - t0) / 1000;
    const tally = meter.reset();
    await dispatcher.stop(5_000);
    const handlerMs = readRecords<{ ms?: number }>(records).flatMap((r) =>
      r.ms === undefined ? [] : [r.ms],
    );
    return {
      ok: delivered && ended,
      messages: o.messages,
      gapSeconds: o.gapSeconds,
      seconds,
      tally,
      handlerMs,
    };
  } finally {
    await bench.close();
  }
}
