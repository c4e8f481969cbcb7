/**
 * Scale case (b): many consumers on one Host with the stand-ins' physics on at scale k. First the
 * supervisor's rounds with every consumer idle (timed, and priced as a month of one a minute),
 * then the load: one hot consumer drains a backlog while a few others get a trickle each, and
 * rounds are timed again under it.
 */
import type { QueueTarget } from '../../lambdas/delivery/ports.ts';
import { usd } from '../pricing.ts';
import { openScaleCase, supervisorDeps, timedRound } from '../scale/case-kit.ts';
import type { CaseSample, ManyConsumersCase } from '../scale/model.ts';
import { localLanes, sustainedWindow } from '../scale/project.ts';
import type { BenchHost } from '../support/bench-host.ts';
import type { Meter } from '../support/meter.ts';
import type { Endpoints } from '../support/standins.ts';
import { until } from '../support/stats.ts';
import { NOOP_WORKER, SLEEP_WORKER } from '../support/workers.ts';
import type { ScaleSetting } from './scale-drain.ts';

const QUIET = { maxBatchSize: 10, maxBatchTimeoutSeconds: 1, maxConcurrency: 1 };

/**
 * The consumers, one after another (the bench's settle runs the executor until nothing is due,
 * which consumers created side by side would race); the first is the hot one.
 */
async function setupConsumers(bench: BenchHost, c: ManyConsumersCase, k: number) {
  const hot = await bench.setupConsumer(
    'hot',
    SLEEP_WORKER,
    {
      maxBatchSize: c.hot.batchSize,
      maxBatchTimeoutSeconds: 0,
      maxConcurrency: localLanes(c.hot.awsConcurrency, k),
    },
    { MS: c.hot.handlerMs },
  );
  const others: { queue: QueueTarget; consumerUid: string }[] = [];
  for (let i = 1; i < c.consumers; i++)
    others.push(await bench.setupConsumer(`idle-${i}`, NOOP_WORKER, QUIET));
  return { hot, trickled: others.slice(0, c.trickles) };
}

/** Sends one message to each queue every 1/rate s until stopped; returns how many it sent. */
function trickle(bench: BenchHost, queues: QueueTarget[], rate: number) {
  let sent = 0;
  let stopped = false;
  const running = Promise.all(
    queues.map(async (q, i) => {
      await new Promise((r) => setTimeout(r, (i * 1000) / rate / Math.max(1, queues.length)));
      while (!stopped) {
        await bench.prefill(q, 1, 64, 1).then(
          () => sent++,
          () => undefined,
        );
        await new Promise((r) => setTimeout(r, 1000 / rate));
      }
    }),
  );
  return {
    stop: async () => {
      stopped = true;
      await running;
      return sent;
    },
  };
}

/** Supervisor rounds over idle consumers, each a minute after the last (simulated clock). */
async function idleRounds(bench: BenchHost, meter: Meter, c: ManyConsumersCase) {
  let simulatedNow = Math.floor(Date.now() / 3_600_000) * 3_600_000;
  const deps = supervisorDeps(bench, meter, () => simulatedNow);
  meter.reset();
  const rounds: { ms: number; calls: number }[] = [];
  for (let i = 0; i < c.idleRounds; i++) {
    simulatedNow += 60_000;
    rounds.push(await timedRound(deps, meter));
  }
  // CloudWatch is asked about every queue of the Host: one metric per consumer's queue.
  return { rounds, usd: usd(meter.reset(), () => true, c.consumers).total };
}

export async function manyConsumersCase(
  endpoints: Endpoints,
  scale: ScaleSetting,
  c: ManyConsumersCase,
  label: string,
): Promise<CaseSample> {
  const { phys, warnings, meter, bench, refusedCalls, close } = await openScaleCase(endpoints, scale);
  try {
    const setupAt = performance.now();
    const { hot, trickled } = await phys.paused(() => setupConsumers(bench, c, scale.k));
    const setupSeconds = (performance.now() - setupAt) / 1000;
    const idle = await idleRounds(bench, meter, c);
    await phys.paused(() => bench.prefill(hot.queue, c.hot.messages, 64, 8));
    const events: [number, number][] = [];
    let delivered = 0;
    let trickleDelivered = 0;
    let batches = 0;
    bench.onFinalized((n, consumerUid) => {
      batches++;
      if (consumerUid !== hot.consumerUid) trickleDelivered += n;
      else {
        delivered += n;
        events.push([performance.now(), n]);
      }
    });
    for (const k of Object.keys(refusedCalls)) delete refusedCalls[k];
    for (const k of Object.keys(warnings.counts)) delete warnings.counts[k];
    meter.reset();
    const mark = phys.mark();
    const t0 = performance.now();
    bench.startDispatcher({ idleWaitSeconds: 1, supervisorMs: 60_000 });
    const flow = trickle(
      bench,
      trickled.map((t) => t.queue),
      c.trickleRate,
    );
    const rounds: { ms: number; calls: number }[] = [];
    const deps = supervisorDeps(bench, meter);
    for (let i = 0; i < c.loadRounds && delivered < c.hot.messages; i++)
      rounds.push(await timedRound(deps, meter));
    const ok = await until(
      () => delivered >= c.hot.messages,
      Math.max(0, t0 + c.timeoutMs - performance.now()),
      20,
    );
    const windowSeconds = (performance.now() - t0) / 1000;
    const physics = phys.since(mark);
    const trickleSent = await flow.stop();
    await until(() => trickleDelivered >= trickleSent, 10_000, 50);
    const sustained = sustainedWindow(events, c.hot.messages);
    return {
      kind: 'many',
      label,
      ok,
      localLanes: localLanes(c.hot.awsConcurrency, scale.k),
      awsConcurrency: c.hot.awsConcurrency,
      batchSize: c.hot.batchSize,
      messages: c.hot.messages,
      delivered,
      batches,
      sustainedSeconds: sustained.seconds,
      sustainedMessages: sustained.messages,
      windowSeconds,
      physics,
      refusedCalls: { ...refusedCalls },
      roundMs: rounds.map((r) => r.ms),
      roundCalls: rounds.map((r) => r.calls),
      consumers: c.consumers,
      warnings: { ...warnings.counts },
      many: {
        consumers: c.consumers,
        trickles: trickled.length,
        trickleSent,
        trickleDelivered,
        idleRoundMs: idle.rounds.map((r) => r.ms),
        idleRoundCalls: idle.rounds.map((r) => r.calls),
        idleRoundsUsd: idle.usd,
        idleRounds: c.idleRounds,
        setupSeconds,
      },
    };
  } finally {
    await close();
  }
}
