/**
 * `npm run bench [-- --quick]`: throughput, utilisation, latency and cost of message delivery on
 * the local stand-ins, each beside a baseline measured in the same run. Writes
 * bench/results/<date>.json (raw samples), <date>.md and latest.md (the table and its
 * explanation) and <date>.png (the chart), and prints the table.
 *
 * --quick: one run per figure with small message counts (a smoke run of a minute or two); its
 * files are <date>-quick.* and latest.md is left alone.
 * --from <results.json>: re-renders the Markdown, chart and summary of an earlier run from its
 * raw samples, without measuring anything.
 * A full run (measured or re-rendered) also rewrites the cost table of docs/costs.md
 * (readme-costs.ts). --out <dir> and --costs-page <file> write elsewhere (the unit test of the
 * cost region uses them).
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import type { BenchConfig, BenchMeta, BenchSamples } from './results-model.ts';
import { laneEndRun, supervisorRun } from './scenarios/idle.ts';
import { arrivalRun, controlPlaneRun, settleLatencyRun } from './scenarios/latency.ts';
import { baselineSteady, hostSteady, type SteadySetting } from './scenarios/steady.ts';
import { baselineDrain, hostDrain } from './scenarios/throughput.ts';
import { utilisationRun } from './scenarios/utilisation.ts';
import { closeShared, warmThreads, workerFile } from './support/bench-host.ts';
import { machineProbeMs } from './support/cpu.ts';
import { installStepFunctionsHook } from './support/sfn-hook.ts';
import { type StandIns, startStandIns } from './support/standins.ts';
import {
  ACK_ALL_WORKER,
  ACK_WORKER,
  ARRIVAL_WORKER,
  NOOP_WORKER,
  SLEEPING_WORKER,
} from './support/workers.ts';
import { writeResults } from './write-results.ts';

/**
 * Steady-stream rates a 2-core machine sustains beside the Host: 200 msg/s in batches of 10 and
 * 1,000 msg/s in batches of 100 (the drains reach roughly twice that at concurrency 10).
 */
const STEADY_SETTINGS: SteadySetting[] = [
  { rate: 200, batchSize: 10, concurrency: 10, maxBatchTimeoutSeconds: 1 },
  { rate: 1_000, batchSize: 100, concurrency: 10, maxBatchTimeoutSeconds: 1 },
];

const FULL: BenchConfig = {
  mode: 'full',
  runs: 3,
  cells: [
    { batchSize: 10, concurrency: 1, messages: 600 },
    { batchSize: 10, concurrency: 10, messages: 1_500 },
    { batchSize: 10, concurrency: 50, messages: 2_000 },
    { batchSize: 100, concurrency: 1, messages: 2_000 },
    { batchSize: 100, concurrency: 10, messages: 4_000 },
    { batchSize: 100, concurrency: 50, messages: 7_500 },
  ],
  drainTimeoutMs: 120_000,
  steady: {
    runs: 2,
    timing: { warmupSeconds: 5, seconds: 20, drainTimeoutMs: 30_000 },
    settings: STEADY_SETTINGS,
  },
  utilisation: { maxConcurrency: 10, batchSize: 10, messages: 1_500 },
  settle: { ackMessages: 200, ackAllBatches: 100 },
  arrival: [
    { maxBatchTimeoutSeconds: 0, samples: 12, idleMinutes: 3 },
    { maxBatchTimeoutSeconds: 1, samples: 10, idleMinutes: 3 },
  ],
  controlPlane: { creates: 30, gets: 200, bareWrites: 200 },
  supervisor: { rounds: 20 },
  laneEnd: { idleWaitSeconds: 20 },
};

const QUICK: BenchConfig = {
  mode: 'quick',
  runs: 1,
  cells: [
    { batchSize: 10, concurrency: 1, messages: 200 },
    { batchSize: 10, concurrency: 10, messages: 600 },
    { batchSize: 10, concurrency: 50, messages: 1_000 },
    { batchSize: 100, concurrency: 1, messages: 1_000 },
    { batchSize: 100, concurrency: 10, messages: 2_000 },
    { batchSize: 100, concurrency: 50, messages: 5_000 },
  ],
  drainTimeoutMs: 60_000,
  steady: {
    runs: 1,
    timing: { warmupSeconds: 2, seconds: 5, drainTimeoutMs: 20_000 },
    settings: STEADY_SETTINGS,
  },
  utilisation: { maxConcurrency: 10, batchSize: 10, messages: 600 },
  settle: { ackMessages: 100, ackAllBatches: 40 },
  arrival: [
    { maxBatchTimeoutSeconds: 0, samples: 5, idleMinutes: 0.25 },
    { maxBatchTimeoutSeconds: 1, samples: 4, idleMinutes: 0.25 },
  ],
  controlPlane: { creates: 10, gets: 50, bareWrites: 100 },
  supervisor: { rounds: 10 },
  laneEnd: { idleWaitSeconds: 2 },
};

const BENCH_DIR = path.dirname(fileURLToPath(import.meta.url));
const startedWall = performance.now();
const log = (msg: string) =>
  process.stderr.write(
    `[bench ${((performance.now() - startedWall) / 1000).toFixed(1).padStart(6)} s] ${msg}\n`,
  );

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      quick: { type: 'boolean', default: false },
      from: { type: 'string' },
      out: { type: 'string' },
      'costs-page': { type: 'string' },
    },
  });
  const outputs = {
    dir: values.out ?? path.join(BENCH_DIR, 'results'),
    costsPage: values['costs-page'] ?? path.join(BENCH_DIR, '..', 'docs', 'costs.md'),
  };
  if (values.from) {
    // Re-renders the report of an earlier run from its raw samples (no measurement).
    const saved = JSON.parse(readFileSync(values.from, 'utf8')) as {
      meta: BenchMeta;
      config: BenchConfig;
      samples: BenchSamples;
    };
    return writeResults(saved.meta, saved.config, saved.samples, outputs);
  }
  const config = values.quick ? QUICK : FULL;
  const startedAt = new Date();
  const loadAverageAtStart = os.loadavg();
  const probeAtStart = machineProbeMs();
  const commit = checkoutMeasured();
  const samples: BenchSamples = {
    throughput: [],
    steady: [],
    utilisation: [],
    settle: [],
    arrival: [],
    controlPlane: [],
    supervisor: [],
    laneEnd: [],
    errors: [],
  };

  installStepFunctionsHook();
  log(`${config.mode} run: starting DynamoDB Local and the SQS stand-in`);
  let standIns: StandIns | undefined;
  try {
    standIns = await startStandIns();
    const { endpoints } = standIns;
    log(`stand-ins up (DynamoDB Local pid ${standIns.pids.dynamodb}, SQS pid ${standIns.pids.sqs})`);

    /** Runs one scenario run; a failure is recorded and the bench goes on with the rest. */
    const attempt = async <T>(
      scenario: string,
      run: number,
      fn: () => Promise<T>,
    ): Promise<T | undefined> => {
      try {
        return await fn();
      } catch (err) {
        const error = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
        samples.errors.push({ scenario, run, error });
        log(`${scenario} run ${run} failed: ${error}`);
        return undefined;
      }
    };

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

    // Throughput: Host and baseline back to back for each cell, cells rotated between runs.
    for (let run = 1; run <= config.runs; run++) {
      const order = config.cells.map((_, i) => config.cells[(i + run - 1) % config.cells.length]!);
      for (const cell of order) {
        const pair = await attempt(`throughput B${cell.batchSize} C${cell.concurrency}`, run, async () => {
          const host = await hostDrain(endpoints, cell, config.drainTimeoutMs);
          const baseline = await baselineDrain(endpoints, cell, config.drainTimeoutMs);
          return { run, cell, host, baseline };
        });
        if (pair) {
          samples.throughput.push(pair);
          log(
            `throughput run ${run} B${cell.batchSize} C${cell.concurrency}: Host ${pair.host.perSecond.toFixed(0)} msg/s, baseline ${pair.baseline.perSecond.toFixed(0)} msg/s`,
          );
        }
      }
    }

    // Steady stream: Host and baseline back to back under the same producer, settings rotated.
    const steady = config.steady;
    for (let run = 1; steady && run <= steady.runs; run++) {
      const order = steady.settings.map((_, i) => steady.settings[(i + run - 1) % steady.settings.length]!);
      for (const setting of order) {
        const label = `steady ${setting.rate}/s B${setting.batchSize} C${setting.concurrency}`;
        const pair = await attempt(label, run, async () => {
          const host = await hostSteady(endpoints, setting, steady.timing);
          const baseline = await baselineSteady(endpoints, setting, steady.timing);
          return { run, host, baseline };
        });
        if (pair) {
          samples.steady?.push(pair);
          log(
            `${label} run ${run}: Host ${pair.host.perSecond.toFixed(0)} msg/s (p99 ${pair.host.latency.p99.toFixed(0)} ms), baseline ${pair.baseline.perSecond.toFixed(0)} msg/s (p99 ${pair.baseline.latency.p99.toFixed(0)} ms)`,
          );
        }
      }
    }

    for (let run = 1; run <= config.runs; run++) {
      const u = await attempt('utilisation', run, () =>
        utilisationRun(endpoints, { ...config.utilisation, timeoutMs: config.drainTimeoutMs }),
      );
      if (u) {
        samples.utilisation.push(u);
        log(
          `utilisation run ${run}: handlers ${u.handlerUtilisation.toFixed(2)}, slots ${u.slotUtilisation.toFixed(2)}`,
        );
      }
    }

    for (let run = 1; run <= config.runs; run++) {
      const s = await attempt('settle latency', run, () =>
        settleLatencyRun(endpoints, { ...config.settle, timeoutMs: config.drainTimeoutMs }),
      );
      if (s) {
        samples.settle.push(s);
        log(
          `settle latency run ${run}: ${s.acknowledge.length} acknowledge, ${s.acknowledgeAll.length} acknowledgeAll`,
        );
      }
    }

    // Send-to-handler runs wait most of the time, so they run side by side (one Host each).
    const arrivals = await Promise.all(
      Array.from({ length: config.runs }, (_, i) => i + 1).flatMap((run) =>
        config.arrival.map((a) =>
          attempt(`send-to-handler t${a.maxBatchTimeoutSeconds}`, run, () =>
            arrivalRun(endpoints, { ...a, timeoutMs: 30_000 }),
          ),
        ),
      ),
    );
    for (const s of arrivals) if (s) samples.arrival.push(s);
    log(`send-to-handler: ${samples.arrival.reduce((a, s) => a + s.sendToHandler.length, 0)} samples`);

    for (let run = 1; run <= config.runs; run++) {
      const s = await attempt('control plane', run, () =>
        controlPlaneRun(endpoints, { ...config.controlPlane, timeoutMs: 30_000 }),
      );
      if (s) {
        samples.controlPlane.push(s);
        log(`control plane run ${run}: ${s.createToSucceeded.length} creates`);
      }
    }

    // Idle: supervisor rounds, with the lane-end runs (mostly a long poll) alongside.
    const laneEnds = Promise.all(
      Array.from({ length: config.runs }, (_, i) =>
        attempt('lane end', i + 1, () =>
          laneEndRun(endpoints, {
            ...config.laneEnd,
            timeoutMs: (config.laneEnd.idleWaitSeconds + 30) * 1000,
          }),
        ),
      ),
    );
    for (let run = 1; run <= config.runs; run++) {
      const s = await attempt('supervisor', run, () => supervisorRun(endpoints, config.supervisor));
      if (s) samples.supervisor.push(s);
    }
    for (const l of await laneEnds) if (l) samples.laneEnd.push(l);
    log('idle scenarios done');
  } finally {
    await closeShared().catch(() => undefined);
    await standIns?.stop();
  }

  const finishedAt = new Date();
  const date = startedAt.toISOString().slice(0, 10);
  const meta: BenchMeta = {
    date,
    ...(commit ? { commit } : {}),
    startedAt: startedAt.toISOString(),
    finishedAt: finishedAt.toISOString(),
    wallSeconds: (performance.now() - startedWall) / 1000,
    node: process.versions.node,
    platform: `${os.type()} ${os.release()} ${os.arch()}`,
    cpus: os.cpus().length,
    cpuModel: os.cpus()[0]?.model.trim() ?? 'unknown CPU',
    loadAverageAtStart,
    loadAverageAtEnd: os.loadavg(),
    probeMs: { atStart: probeAtStart, atEnd: machineProbeMs() },
  };
  return writeResults(meta, config, samples, outputs);
}

/** The commit this run measures, read before the run writes its results into the tree. */
function checkoutMeasured(): string | undefined {
  const git = (...args: string[]) =>
    execFileSync('git', args, {
      cwd: BENCH_DIR,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    }).trim();
  try {
    const head = git('rev-parse', '--short', 'HEAD');
    return git('status', '--porcelain', '--untracked-files=no') ? `${head} + changes` : head;
  } catch {
    return undefined; // not a git checkout
  }
}

main().then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(
      `bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
    );
    process.exit(1);
  },
);
