/** The shape of `bench/results/<date>.json`: configuration, prices, raw samples, summary. */

import type { ScaleConfig, ScaleSamples } from './scale/model.ts';
import type { LaneEndSample, SupervisorSample } from './scenarios/idle.ts';
import type { ArrivalSample, ControlPlaneSample, SettleLatencySample } from './scenarios/latency.ts';
import type {
  SteadyBaselineSample,
  SteadyHostSample,
  SteadySetting,
  SteadyTiming,
} from './scenarios/steady.ts';
import type { BaselineSample, Cell, HostDrainSample } from './scenarios/throughput.ts';
import type { UtilisationSample } from './scenarios/utilisation.ts';
import type { ShapesConfig, ShapesSamples } from './shapes/model.ts';

export interface BenchConfig {
  mode: 'full' | 'quick';
  runs: number;
  cells: Cell[];
  drainTimeoutMs: number;
  /** Producers at a fixed rate while the consumer drains (absent in results before 2026-12-01). */
  steady?: { runs: number; timing: SteadyTiming; settings: SteadySetting[] };
  utilisation: { maxConcurrency: number; batchSize: number; messages: number };
  settle: { ackMessages: number; ackAllBatches: number };
  arrival: { maxBatchTimeoutSeconds: number; samples: number; idleMinutes: number }[];
  controlPlane: { creates: number; gets: number; bareWrites: number };
  supervisor: { rounds: number };
  laneEnd: { idleWaitSeconds: number };
  /** The scale cases under the stand-ins' physics (absent in results before 2026-12-05). */
  scale?: ScaleConfig;
  /** Cost by traffic shape (absent in results before 2026-12-05). */
  shapes?: ShapesConfig;
}

export interface ThroughputPair {
  run: number;
  cell: Cell;
  host: HostDrainSample;
  baseline: BaselineSample;
}

export interface SteadyPair {
  run: number;
  host: SteadyHostSample;
  baseline: SteadyBaselineSample;
}

export interface ScenarioError {
  scenario: string;
  run: number;
  error: string;
}

export interface BenchSamples {
  throughput: ThroughputPair[];
  steady?: SteadyPair[];
  utilisation: UtilisationSample[];
  settle: SettleLatencySample[];
  arrival: ArrivalSample[];
  controlPlane: ControlPlaneSample[];
  supervisor: SupervisorSample[];
  laneEnd: LaneEndSample[];
  /** The scale cases' samples (absent in results before 2026-12-05). */
  scale?: ScaleSamples;
  /** The traffic-shape cases' samples (absent in results before 2026-12-05). */
  shapes?: ShapesSamples;
  errors: ScenarioError[];
}

export interface BenchMeta {
  date: string;
  /** The checkout measured: `git describe`-like short commit, "+ changes" when the tree differed. */
  commit?: string;
  startedAt: string;
  finishedAt: string;
  wallSeconds: number;
  node: string;
  platform: string;
  cpus: number;
  cpuModel: string;
  loadAverageAtStart: number[];
  loadAverageAtEnd: number[];
  /** `machineProbeMs` before the stand-ins start and after they stop (runs before 2026-12-03: none). */
  probeMs?: { atStart: number; atEnd: number };
}
