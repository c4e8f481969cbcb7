import type { CpuPerBatch } from '../summary-model.ts';
import { type CpuSpent, totalCpu } from '../support/cpu.ts';
import { spread } from '../support/stats.ts';

/** CPU per batch from samples that carry CPU times (results written before them have none). */
export function cpuPerBatch(
  runs: { host: { cpu?: CpuSpent; batches: number }; baseline?: { cpu?: CpuSpent; batches?: number } }[],
): CpuPerBatch | undefined {
  const measured = runs.filter((r) => r.host.cpu && r.host.batches > 0);
  if (measured.length === 0) return undefined;
  const per = (f: (c: CpuSpent) => number) =>
    spread(measured.map((r) => (f(r.host.cpu as CpuSpent) * 1000) / r.host.batches));
  const base = measured.flatMap((r) =>
    r.baseline?.cpu && (r.baseline.batches ?? 0) > 0
      ? [{ cpu: r.baseline.cpu, batches: r.baseline.batches ?? 0 }]
      : [],
  );
  return {
    host: per((c) => c.host),
    dynamodb: per((c) => c.dynamodb ?? Number.NaN),
    sqs: per((c) => c.sqs ?? Number.NaN),
    all: per(totalCpu),
    cores: spread(
      measured.map((r) => totalCpu(r.host.cpu as CpuSpent) / (r.host.cpu as CpuSpent).wallSeconds),
    ),
    baseline: spread(base.map((b) => (totalCpu(b.cpu) * 1000) / b.batches)),
    baselineCores: spread(base.map((b) => totalCpu(b.cpu) / b.cpu.wallSeconds)),
  };
}

/** Spread into a summary object, so that results without CPU times carry no `cpu` key at all. */
export const withCpu = (cpu: CpuPerBatch | undefined) => (cpu ? { cpu } : {});
