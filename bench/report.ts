/**
 * Turns a run's raw samples into its summary: medians with min and max over runs, and met or
 * missed against the bench's targets. Every number here is computed from the samples of this run;
 * the only outside inputs are the prices. Each group of figures is summarised in summary/.
 */
import type { BenchConfig, BenchSamples } from './results-model.ts';
import { shapeRows, summariseShapes } from './shapes/summarise.ts';
import { dynamoRows, measuredCells } from './summary/cell-counts.ts';
import { drainCosts, producerPer100 } from './summary/cost.ts';
import { idleRows, idleSummary } from './summary/idle.ts';
import { arrivalRows, controlPlaneRows, meanRecord, settleRows } from './summary/latency.ts';
import { okSteadyPairs, steadyRows } from './summary/steady.ts';
import { throughputRows } from './summary/throughput.ts';
import { utilisationDetail, utilisationRows } from './summary/utilisation.ts';
import type { Summary } from './summary-model.ts';

// readme-costs.ts reads the summary's type from here.
export type { Summary } from './summary-model.ts';

/** The rows keep this order in the results table: throughput, steady, utilisation, latency, per batch, cost, shapes. */
export function summarise(config: BenchConfig, s: BenchSamples): Summary {
  const throughput = throughputRows(config.cells, s.throughput);
  const okSteady = okSteadyPairs(s);
  const utilisation = s.utilisation.filter((x) => x.ok);
  const settle = s.settle.filter((x) => x.ok);
  const cells = measuredCells(config, s, okSteady);
  const cost = drainCosts(config.cells, s.throughput);
  const idle = idleSummary(s.supervisor, s.laneEnd);
  const shapes = s.shapes ? summariseShapes(s.shapes) : undefined;
  const rows = [
    ...throughput.rows,
    ...steadyRows(config.steady?.settings ?? [], okSteady),
    ...utilisationRows(utilisation),
    ...settleRows(settle),
    ...arrivalRows(config.arrival, s.arrival),
    ...controlPlaneRows(s.controlPlane.filter((x) => x.ok)),
    ...dynamoRows(cells),
    ...cost.rows,
    ...idleRows(idle),
    ...(shapes ? shapeRows(shapes) : []),
  ];
  return {
    rows,
    costs: cost.costs,
    cells,
    idle,
    throughputRatios: throughput.ratios,
    producerPer100: producerPer100(s.throughput),
    utilisationDetail: utilisationDetail(utilisation),
    callsPerSettle: meanRecord(settle.map((x) => x.callsPerSettle ?? {})),
    ...(shapes ? { shapes } : {}),
  };
}
