/**
 * `npm run bench [-- --quick]`: throughput, utilisation, latency and cost of message delivery on
 * the local stand-ins, each beside a baseline measured in the same run. Writes
 * bench/results/<date>.json (raw samples), <date>.md and latest.md (the table and its
 * explanation) and <date>.png (the chart), and prints the table.
 *
 * --quick: one run per figure with small message counts (a smoke run of a minute or two); its
 * files are <date>-quick.* and latest.md is left alone.
 * --from <results.json>: re-renders the Markdown, chart and summary of an earlier run from its
 * raw samples, without measuring anything (a scale run's JSON too).
 * --scenario scale: only the scale cases (one consumer at maxConcurrency 250, many consumers on
 * one Host, a retry storm) with the stand-ins' throughput physics on at a scale k; its files are
 * <date>-scale.{json,md} (`-scale-quick` with --quick), and neither latest.md nor docs/costs.md
 * is touched. A full run includes the scale cases in its own files.
 * --scenario shapes: only the cost by traffic shape (arrival rates from one a minute to 1,000 a
 * second); its files are <date>-shapes.{json,md} and <date>-shapes-rates.png (`-shapes-quick`
 * with --quick). A full one rewrites the shapes region of docs/costs.md, and so does `--from` of
 * its JSON, a quick one's too (the region names the run). A full run includes the same cases.
 * A full run (measured or re-rendered) also rewrites the cost table and the shapes region of
 * docs/costs.md (readme-costs.ts). --out <dir> and --costs-page <file> write elsewhere (the unit
 * test of the cost region uses them).
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { measureRun } from './measure-run.ts';
import type { BenchConfig, BenchMeta, BenchSamples } from './results-model.ts';
import { SCALE_FULL, SCALE_QUICK } from './scale/configs.ts';
import type { ScaleSamples } from './scale/model.ts';
import { runScale, writeScaleResults } from './scale/write-scale.ts';
import type { SteadySetting } from './scenarios/steady.ts';
import { SHAPES_FULL, SHAPES_QUICK } from './shapes/configs.ts';
import type { ShapesSamples } from './shapes/model.ts';
import { runShapes, writeShapesResults } from './shapes/write-shapes.ts';
import { machineProbeMs } from './support/cpu.ts';
import { type Outputs, writeResults } from './write-results.ts';

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
  shapes: SHAPES_FULL,
  scale: SCALE_FULL,
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
  shapes: SHAPES_QUICK,
  scale: SCALE_QUICK,
};

const BENCH_DIR = path.dirname(fileURLToPath(import.meta.url));
const startedWall = performance.now();
const log = (msg: string) =>
  process.stderr.write(
    `[bench ${((performance.now() - startedWall) / 1000).toFixed(1).padStart(6)} s] ${msg}\n`,
  );

const SCENARIOS = ['scale', 'shapes'] as const;
type Scenario = (typeof SCENARIOS)[number];

interface Options {
  quick: boolean;
  scenario?: Scenario;
  from?: string;
  outputs: Outputs;
}

function options(): Options {
  const { values } = parseArgs({
    options: {
      quick: { type: 'boolean', default: false },
      from: { type: 'string' },
      out: { type: 'string' },
      'costs-page': { type: 'string' },
      scenario: { type: 'string' },
    },
  });
  const scenario = values.scenario as Scenario | undefined;
  if (scenario !== undefined && !SCENARIOS.includes(scenario))
    throw new Error(`unknown --scenario ${scenario} (known: ${SCENARIOS.join(', ')})`);
  const outputs = {
    dir: values.out ?? path.join(BENCH_DIR, 'results'),
    costsPage: values['costs-page'] ?? path.join(BENCH_DIR, '..', 'docs', 'costs.md'),
  };
  return {
    quick: values.quick,
    ...(scenario ? { scenario } : {}),
    ...(values.from ? { from: values.from } : {}),
    outputs,
  };
}

/** Re-renders the report of an earlier run from its raw samples (no measurement). */
function rerender(from: string, outputs: Outputs): number {
  const saved = JSON.parse(readFileSync(from, 'utf8')) as {
    meta: BenchMeta;
    config: BenchConfig;
    samples: BenchSamples;
    scale?: ScaleSamples;
    shapes?: ShapesSamples;
  };
  if (saved.scale) return writeScaleResults(saved.meta, saved.scale, outputs.dir);
  if (saved.shapes) return writeShapesResults(saved.meta, saved.shapes, outputs, true);
  return writeResults(saved.meta, saved.config, saved.samples, outputs);
}

/** What the machine looked like before the run, read before anything starts. */
function machineAtStart() {
  return {
    startedAt: new Date(),
    loadAverageAtStart: os.loadavg(),
    probeAtStart: machineProbeMs(),
    commit: checkoutMeasured(),
  };
}

function runMeta(start: ReturnType<typeof machineAtStart>): BenchMeta {
  const finishedAt = new Date();
  return {
    date: start.startedAt.toISOString().slice(0, 10),
    ...(start.commit ? { commit: start.commit } : {}),
    startedAt: start.startedAt.toISOString(),
    finishedAt: finishedAt.toISOString(),
    wallSeconds: (performance.now() - startedWall) / 1000,
    node: process.versions.node,
    platform: `${os.type()} ${os.release()} ${os.arch()}`,
    cpus: os.cpus().length,
    cpuModel: os.cpus()[0]?.model.trim() ?? 'unknown CPU',
    loadAverageAtStart: start.loadAverageAtStart,
    loadAverageAtEnd: os.loadavg(),
    probeMs: { atStart: start.probeAtStart, atEnd: machineProbeMs() },
  };
}

async function main(): Promise<number> {
  const { quick, scenario, from, outputs } = options();
  if (from) return rerender(from, outputs);
  if (scenario === 'scale') {
    const start = machineAtStart();
    const samples = await runScale(quick ? SCALE_QUICK : SCALE_FULL, log);
    return writeScaleResults(runMeta(start), samples, outputs.dir);
  }
  if (scenario === 'shapes') {
    const start = machineAtStart();
    const shapesConfig = quick ? SHAPES_QUICK : SHAPES_FULL;
    const samples = await runShapes(shapesConfig, log);
    return writeShapesResults(runMeta(start), samples, outputs, !quick);
  }
  const config = quick ? QUICK : FULL;
  const start = machineAtStart();
  const samples = await measureRun(config, log);
  return writeResults(runMeta(start), config, samples, outputs);
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
