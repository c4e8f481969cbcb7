/**
 * Arrivals too sparse for a stream the bench could wait out (one every 10 s, one a minute): the
 * episodes their cost is composed of, each measured whole on a Host of its own, with the idle
 * wait the Host has on AWS.
 *
 * - An isolated message: sent through the Host to a consumer with no lane that has run one
 *   message before, it wakes one, which gathers it for the batch timeout, runs it, polls once
 *   more and ends.
 * - A kept-alive lane: `messages` sent `gapSeconds` apart, each sent while the lane of the one
 *   before may still run (then it joins that lane, else it wakes its own), counted until the last
 *   lane ends.
 *
 * - A message sent straight to SQS (`straightToSqs`): no wake announces it, so the supervisor's
 *   round (every minute, as on AWS) starts its lane; sent just after a round, it shows how long
 *   such a message waits at most, less the round's own time and SQS's count lag.
 *
 * Each is counted from the first send until every lane has ended, so that the Express execution
 * and the last worker invocation, billed at their end, fall inside it.
 */
import { SendMessageCommand } from '@aws-sdk/client-sqs';
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
  /** From the first send until its batch was finalised (s). */
  firstDeliveredSeconds?: number;
  /** The supervisor's round period in the episode (s). */
  supervisorSeconds?: number;
}

export interface EpisodeOptions {
  settings: ConsumerSettings;
  idleWaitSeconds: number;
  messages: number;
  gapSeconds: number;
  /** For the deliveries, and then again for the lanes' ends. */
  timeoutMs: number;
  /** Sent straight to SQS (no wake), with the supervisor's round every minute. */
  straightToSqs?: true;
}

const SUPERVISOR_MS = 60_000;

export async function episodeRun(endpoints: Endpoints, o: EpisodeOptions): Promise<EpisodeSample> {
  const meter = new Meter();
  const bench = await createBenchHost(endpoints, { meter, idleWaitSeconds: o.idleWaitSeconds });
  const records = recordFile('episode');
  try {
    const { queue } = await bench.setupConsumer('episode', STEADY_WORKER, o.settings, { RECORDS: records });
    let handled = 0;
    let firstAt: number | undefined;
    bench.onFinalized((n) => {
      handled += n;
      firstAt ??= performance.now();
    });
    // Through the Host, no supervisor round within the episode: each lane is started by a send,
    // as a trickle through the Host starts it on AWS. Straight to SQS, the round every minute,
    // its first as the dispatcher starts.
    const supervisorMs = o.straightToSqs ? SUPERVISOR_MS : 3_600_000;
    const dispatcher = bench.startDispatcher({ idleWaitSeconds: o.idleWaitSeconds, supervisorMs });
    await sleep(FIRST_ROUND_MS);
    const body = new Uint8Array(64).fill(97);
    // Through the Host, the consumer has run a message before, as a trickle's consumer has. (A
    // lane's take still lands on a shard its generation may not have used yet, at one slot a
    // shard: a refused try, a read of every shard and the adopting write, until every shard has
    // been used — which a trickle of single lanes reaches only slowly.)
    if (!o.straightToSqs) {
      await bench.host.producer.send(queue, body);
      const warm =
        (await until(() => handled >= 1, o.timeoutMs, 20)) &&
        (await until(() => dispatcher.running().length === 0, o.timeoutMs, 20));
      if (!warm) throw new Error('the warm-up message was not handled, or its lane did not end');
      handled = 0;
      firstAt = undefined;
    }
    const warmRecords = readRecords(records).length;
    meter.reset();
    const t0 = performance.now();
    for (let i = 0; i < o.messages; i++) {
      await sleep(Math.max(0, t0 + i * o.gapSeconds * 1000 - performance.now()));
      await attribute('producer', () =>
        o.straightToSqs
          ? bench.sqs.send(
              new SendMessageCommand({ QueueUrl: queue.sqsUrl, MessageBody: new TextDecoder().decode(body) }),
            )
          : bench.host.producer.send(queue, body),
      );
    }
    const delivered = await until(() => handled >= o.messages, o.timeoutMs, 20);
    const ended = delivered && (await until(() => dispatcher.running().length === 0, o.timeoutMs, 20));
    const seconds = (performance.now() - t0) / 1000;
    const tally = meter.reset();
    await dispatcher.stop(5_000);
    const handlerMs = readRecords<{ ms?: number }>(records)
      .slice(warmRecords)
      .flatMap((r) => (r.ms === undefined ? [] : [r.ms]));
    return {
      ok: delivered && ended,
      messages: o.messages,
      gapSeconds: o.gapSeconds,
      seconds,
      tally,
      handlerMs,
      ...(firstAt !== undefined ? { firstDeliveredSeconds: (firstAt - t0) / 1000 } : {}),
      supervisorSeconds: supervisorMs / 1000,
    };
  } finally {
    await bench.close();
  }
}
