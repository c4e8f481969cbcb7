/**
 * Scale cases (a) and (c): one consumer drains a pre-filled backlog through the real dispatcher
 * with the stand-ins' physics on at scale k — a handler of a few milliseconds (a), or one that
 * always throws with the retries going to a dead-letter queue (c). The window runs from the
 * dispatcher's start until every message was delivered (a) or dead-lettered (c).
 */
import { GetQueueAttributesCommand } from '@aws-sdk/client-sqs';
import type { QueueTarget } from '../../lambdas/delivery/ports.ts';
import { openScaleCase, supervisorDeps, timedRound } from '../scale/case-kit.ts';
import type { CaseSample, DrainCase, StormCase } from '../scale/model.ts';
import { localLanes, sustainedWindow } from '../scale/project.ts';
import type { BenchHost } from '../support/bench-host.ts';
import type { Endpoints } from '../support/standins.ts';
import { until } from '../support/stats.ts';
import { SLEEP_WORKER, THROWING_WORKER } from '../support/workers.ts';

export interface ScaleSetting {
  k: number;
  transactionMs: number;
}

/** Messages in a queue, visible or not (the stand-in answers exactly). */
async function depth(bench: BenchHost, q: QueueTarget): Promise<number> {
  const out = await bench.sqs.send(
    new GetQueueAttributesCommand({
      QueueUrl: q.sqsUrl,
      AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'],
    }),
  );
  const a = out.Attributes ?? {};
  return Number(a.ApproximateNumberOfMessages ?? 0) + Number(a.ApproximateNumberOfMessagesNotVisible ?? 0);
}

/** The consumer (and for a storm its dead-letter queue), its backlog sent. */
async function setup(bench: BenchHost, c: DrainCase | StormCase, lanes: number) {
  const storm = 'maxRetries' in c ? c : undefined;
  const dlq = storm ? await bench.createQueue('storm-dlq') : undefined;
  const { queue } = await bench.setupConsumer(
    storm ? 'storm' : 'drain',
    storm ? THROWING_WORKER : SLEEP_WORKER,
    {
      maxBatchSize: c.batchSize,
      maxBatchTimeoutSeconds: 0,
      maxConcurrency: lanes,
      maxRetries: storm?.maxRetries ?? 3,
      retryDelaySeconds: 0,
      ...(dlq ? { deadLetterQueue: dlq.queueUid } : {}),
    },
    { MS: c.handlerMs },
  );
  await bench.prefill(queue, c.messages, 64, 8);
  return { queue, dlq };
}

interface Progress {
  events: [number, number][];
  delivered: number;
  batches: number;
}

export async function drainCase(
  endpoints: Endpoints,
  scale: ScaleSetting,
  c: DrainCase | StormCase,
  label: string,
): Promise<CaseSample> {
  const storm = 'maxRetries' in c ? c : undefined;
  const { phys, warnings, meter, bench, refusedCalls, close } = await openScaleCase(endpoints, scale);
  try {
    const lanes = localLanes(c.awsConcurrency, scale.k);
    const { dlq } = await phys.paused(() => setup(bench, c, lanes));
    const p: Progress = { events: [], delivered: 0, batches: 0 };
    bench.onFinalized((n) => {
      p.delivered += n;
      p.batches++;
      p.events.push([performance.now(), n]);
    });
    meter.reset();
    for (const k of Object.keys(warnings.counts)) delete warnings.counts[k];
    for (const k of Object.keys(refusedCalls)) delete refusedCalls[k];
    const mark = phys.mark();
    const t0 = performance.now();
    const dispatcher = bench.startDispatcher({ idleWaitSeconds: 1, supervisorMs: 60_000 });
    const rounds: { ms: number; calls: number }[] = [];
    // One supervisor round while the consumer is busiest: what a round costs under this load.
    await until(() => p.delivered >= c.messages * 0.3, c.timeoutMs, 20);
    rounds.push(await timedRound(supervisorDeps(bench, meter), meter));
    let deadLettered = 0;
    const done = storm
      ? async () => {
          deadLettered = dlq ? await depth(bench, dlq) : 0;
          return deadLettered >= c.messages;
        }
      : async () => p.delivered >= c.messages;
    const deadline = t0 + c.timeoutMs;
    let ok = await done();
    while (!ok && performance.now() < deadline) {
      await new Promise((r) => setTimeout(r, storm ? 250 : 20));
      ok = await done();
    }
    const windowSeconds = (performance.now() - t0) / 1000;
    const physics = phys.since(mark);
    const tally = meter.snapshot();
    await dispatcher.stop(10_000);
    const sustained = sustainedWindow(p.events, storm ? c.messages * (1 + storm.maxRetries) : c.messages);
    return {
      kind: storm ? 'storm' : 'drain',
      label,
      ok,
      localLanes: lanes,
      awsConcurrency: c.awsConcurrency,
      batchSize: c.batchSize,
      messages: c.messages,
      delivered: p.delivered,
      batches: p.batches,
      sustainedSeconds: sustained.seconds,
      sustainedMessages: sustained.messages,
      windowSeconds,
      physics,
      refusedCalls: { ...refusedCalls },
      roundMs: rounds.map((r) => r.ms),
      roundCalls: rounds.map((r) => r.calls),
      consumers: 1,
      warnings: { ...warnings.counts },
      ...(storm
        ? {
            storm: {
              maxRetries: storm.maxRetries,
              deliveries: p.delivered,
              deadLettered,
              failedFinalisations:
                (bench.failures['batch-host:finalize'] ?? 0) + (bench.failures['batch-host:deadLetter'] ?? 0),
              lanesFailed: tally.transitions.LaneFailed ?? 0,
              recoveries: tally.transitions.RecoverBatch ?? 0,
              lanesEnded: tally.transitions.LaneDone ?? 0,
            },
          }
        : {}),
    };
  } finally {
    await close();
  }
}
