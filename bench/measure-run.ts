/**
 * One measured run: starts the stand-ins, warms the worker threads, then runs every scenario in
 * turn against them. A scenario run that fails is recorded in the samples and the run goes on,
 * so that one failure costs its figure, not the whole run.
 */
import type { BenchConfig, BenchSamples } from './results-model.ts';
import { measureScale } from './scale/measure-scale.ts';
import { warmScaleThreads } from './scale/write-scale.ts';
import { laneEndRun, supervisorRun } from './scenarios/idle.ts';
import { arrivalRun, controlPlaneRun, settleLatencyRun } from './scenarios/latency.ts';
import { baselineSteady, hostSteady } from './scenarios/steady.ts';
import { baselineDrain, hostDrain } from './scenarios/throughput.ts';
import { utilisationRun } from './scenarios/utilisation.ts';
import { measureShapes } from './shapes/measure-shapes.ts';
import { closeShared, warmThreads, workerFile } from './support/bench-host.ts';
import { installStepFunctionsHook } from './support/sfn-hook.ts';
import { type Endpoints, type StandIns, startStandIns } from './support/standins.ts';
import {
  ACK_ALL_WORKER,
  ACK_WORKER,
  ARRIVAL_WORKER,
  NOOP_WORKER,
  SLEEPING_WORKER,
} from './support/workers.ts';

export type Log = (msg: string) => void;

interface Run {
  config: BenchConfig;
  endpoints: Endpoints;
  samples: BenchSamples;
  log: Log;
  /** Runs one scenario run; undefined when it failed (and was recorded). */
  attempt<T>(scenario: string, run: number, fn: () => Promise<T>): Promise<T | undefined>;
}

const emptySamples = (): BenchSamples => ({
  throughput: [],
  steady: [],
  utilisation: [],
  settle: [],
  arrival: [],
  controlPlane: [],
  supervisor: [],
  laneEnd: [],
  errors: [],
});

const runNumbers = (runs: number) => Array.from({ length: runs }, (_, i) => i + 1);

/** Every list rotated by the run's number, so no cell or setting always runs first. */
const rotated = <T>(list: T[], run: number) => list.map((_, i) => list[(i + run - 1) % list.length]!);

function attempter(samples: BenchSamples, log: Log): Run['attempt'] {
  return async (scenario, run, fn) => {
    try {
      return await fn();
    } catch (err) {
      const error = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
      samples.errors.push({ scenario, run, error });
      log(`${scenario} run ${run} failed: ${error}`);
      return undefined;
    }
  };
}

/** Threads are started before any run, so that no figure pays for a thread's start. */
async function warmUp({ config, endpoints, attempt, log }: Run): Promise<void> {
  const maxConcurrency = Math.max(
    ...config.cells.map((c) => c.concurrency),
    config.utilisation.maxConcurrency,
  );
  await warmThreads(workerFile(NOOP_WORKER), maxConcurrency);
  await warmThreads(workerFile(SLEEPING_WORKER), config.utilisation.maxConcurrency);
  await warmThreads(workerFile(ACK_WORKER), 2);
  await warmThreads(workerFile(ACK_ALL_WORKER), 2);
  await warmThreads(workerFile(ARRIVAL_WORKER), 1);
  log(`worker threads started; warm-up drain`);
  await attempt('warm-up', 0, () =>
    hostDrain(endpoints, { batchSize: 10, concurrency: 10, messages: 300 }, config.drainTimeoutMs),
  );
}

/** Host and baseline back to back for each cell, cells rotated between runs. */
async function throughput({ config, endpoints, samples, attempt, log }: Run): Promise<void> {
  for (const run of runNumbers(config.runs)) {
    for (const cell of rotated(config.cells, run)) {
      const pair = await attempt(`throughput B${cell.batchSize} C${cell.concurrency}`, run, async () => {
        const host = await hostDrain(endpoints, cell, config.drainTimeoutMs);
        const baseline = await baselineDrain(endpoints, cell, config.drainTimeoutMs);
        return { run, cell, host, baseline };
      });
      if (!pair) continue;
      samples.throughput.push(pair);
      log(
        `throughput run ${run} B${cell.batchSize} C${cell.concurrency}: ` +
          `Host ${pair.host.perSecond.toFixed(0)} msg/s, baseline ${pair.baseline.perSecond.toFixed(0)} msg/s`,
      );
    }
  }
}

/** Host and baseline back to back under the same producer, settings rotated between runs. */
async function steadyStream({ config, endpoints, samples, attempt, log }: Run): Promise<void> {
  const steady = config.steady;
  if (!steady) return;
  for (const run of runNumbers(steady.runs)) {
    for (const setting of rotated(steady.settings, run)) {
      const label = `steady ${setting.rate}/s B${setting.batchSize} C${setting.concurrency}`;
      const pair = await attempt(label, run, async () => {
        const host = await hostSteady(endpoints, setting, steady.timing);
        const baseline = await baselineSteady(endpoints, setting, steady.timing);
        return { run, host, baseline };
      });
      if (!pair) continue;
      samples.steady?.push(pair);
      const side = (s: typeof pair.host | typeof pair.baseline) =>
        `${s.perSecond.toFixed(0)} msg/s (p99 ${s.latency.p99.toFixed(0)} ms)`;
      log(`${label} run ${run}: Host ${side(pair.host)}, baseline ${side(pair.baseline)}`);
    }
  }
}

async function utilisation({ config, endpoints, samples, attempt, log }: Run): Promise<void> {
  for (const run of runNumbers(config.runs)) {
    const u = await attempt('utilisation', run, () =>
      utilisationRun(endpoints, { ...config.utilisation, timeoutMs: config.drainTimeoutMs }),
    );
    if (!u) continue;
    samples.utilisation.push(u);
    log(
      `utilisation run ${run}: handlers ${u.handlerUtilisation.toFixed(2)}, slots ${u.slotUtilisation.toFixed(2)}`,
    );
  }
}

async function settleLatency({ config, endpoints, samples, attempt, log }: Run): Promise<void> {
  for (const run of runNumbers(config.runs)) {
    const s = await attempt('settle latency', run, () =>
      settleLatencyRun(endpoints, { ...config.settle, timeoutMs: config.drainTimeoutMs }),
    );
    if (!s) continue;
    samples.settle.push(s);
    log(
      `settle latency run ${run}: ${s.acknowledge.length} acknowledge, ${s.acknowledgeAll.length} acknowledgeAll`,
    );
  }
}

/** Send-to-handler runs wait most of the time, so they run side by side (one Host each). */
async function sendToHandler({ config, endpoints, samples, attempt, log }: Run): Promise<void> {
  const arrivals = await Promise.all(
    runNumbers(config.runs).flatMap((run) =>
      config.arrival.map((a) =>
        attempt(`send-to-handler t${a.maxBatchTimeoutSeconds}`, run, () =>
          arrivalRun(endpoints, { ...a, timeoutMs: 30_000 }),
        ),
      ),
    ),
  );
  for (const s of arrivals) if (s) samples.arrival.push(s);
  log(`send-to-handler: ${samples.arrival.reduce((a, s) => a + s.sendToHandler.length, 0)} samples`);
}

async function controlPlane({ config, endpoints, samples, attempt, log }: Run): Promise<void> {
  for (const run of runNumbers(config.runs)) {
    const s = await attempt('control plane', run, () =>
      controlPlaneRun(endpoints, { ...config.controlPlane, timeoutMs: 30_000 }),
    );
    if (!s) continue;
    samples.controlPlane.push(s);
    log(`control plane run ${run}: ${s.createToSucceeded.length} creates`);
  }
}

/** Supervisor rounds, with the lane-end runs (mostly a long poll) alongside. */
async function idle({ config, endpoints, samples, attempt, log }: Run): Promise<void> {
  const laneEnds = Promise.all(
    runNumbers(config.runs).map((run) =>
      attempt('lane end', run, () =>
        laneEndRun(endpoints, {
          ...config.laneEnd,
          timeoutMs: (config.laneEnd.idleWaitSeconds + 30) * 1000,
        }),
      ),
    ),
  );
  for (const run of runNumbers(config.runs)) {
    const s = await attempt('supervisor', run, () => supervisorRun(endpoints, config.supervisor));
    if (s) samples.supervisor.push(s);
  }
  for (const l of await laneEnds) if (l) samples.laneEnd.push(l);
  log('idle scenarios done');
}

/** Cost by traffic shape; a failed case is recorded in the shape samples too. */
async function shapes({ config, endpoints, samples, log }: Run): Promise<void> {
  if (!config.shapes) return;
  samples.shapes = await measureShapes(config.shapes, endpoints, log);
  for (const e of samples.shapes.errors)
    samples.errors.push({ scenario: e.scenario, run: 1, error: e.error });
}

/** The scale cases, each under physics of its own; a failed case is recorded in the scale samples. */
async function scale({ config, endpoints, samples, log }: Run): Promise<void> {
  if (!config.scale) return;
  await warmScaleThreads(config.scale);
  samples.scale = await measureScale(config.scale, endpoints, log);
  for (const e of samples.scale.errors) samples.errors.push({ scenario: e.scenario, run: 1, error: e.error });
}

const SCENARIOS = [
  warmUp,
  throughput,
  steadyStream,
  utilisation,
  settleLatency,
  sendToHandler,
  controlPlane,
  idle,
  shapes,
  scale,
];

export async function measureRun(config: BenchConfig, log: Log): Promise<BenchSamples> {
  const samples = emptySamples();
  installStepFunctionsHook();
  log(`${config.mode} run: starting DynamoDB Local and the SQS stand-in`);
  let standIns: StandIns | undefined;
  try {
    standIns = await startStandIns();
    log(`stand-ins up (DynamoDB Local pid ${standIns.pids.dynamodb}, SQS pid ${standIns.pids.sqs})`);
    const run: Run = {
      config,
      endpoints: standIns.endpoints,
      samples,
      log,
      attempt: attempter(samples, log),
    };
    for (const scenario of SCENARIOS) await scenario(run);
  } finally {
    // A pool that fails to close must not cost the run's samples; the process exits after writing them.
    await closeShared().catch(() => undefined);
    await standIns?.stop();
  }
  return samples;
}
