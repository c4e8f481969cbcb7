/**
 * The bench's CPU figures (every miss is explained with the measured breakdown): CPU
 * seconds are read per process from /proc, turned into milliseconds per batch and cores busy,
 * and absent — not zero — for results written before they were measured.
 */
import { describe, expect, it } from 'vitest';
import { cpuTable } from '../../../bench/markdown/tables.ts';
import { cpuPerBatch } from '../../../bench/summary/cpu-per-batch.ts';
import type { Summary } from '../../../bench/summary-model.ts';
import { cpuMark, cpuSince, measureStandIns } from '../../../bench/support/cpu.ts';

/** Busy until this process has used `ms` more CPU (by CPU time, not wall time: the machine may be loaded). */
function spin(ms: number) {
  const start = process.cpuUsage();
  let x = 0;
  for (;;) {
    for (let i = 0; i < 10_000; i++) x += Math.sqrt(x + 1);
    const used = process.cpuUsage(start);
    if ((used.user + used.system) / 1000 >= ms) return x;
  }
}

describe('bench CPU per batch', () => {
  it('reads the CPU time of other processes by PID, and of this process', () => {
    // This process stands in for both stand-ins: /proc/<pid>/stat must show the spin too.
    measureStandIns({ dynamodb: process.pid, sqs: process.pid });
    const from = cpuMark();
    const wallFrom = performance.now();
    spin(300);
    const wall = (performance.now() - wallFrom) / 1000;
    const spent = cpuSince(from);
    // The process's CPU time counts every thread (the GC's too), so the spin may take a little
    // less wall time than the 300 ms of CPU it waits for: the wall time is the one it took.
    expect(spent.wallSeconds).toBeGreaterThanOrEqual(wall);
    expect(spent.host).toBeGreaterThanOrEqual(0.3);
    // /proc counts in clock ticks (10 ms): allow one tick either side.
    expect(spent.dynamodb).toBeGreaterThanOrEqual(0.28);
    expect(spent.sqs).toBeGreaterThanOrEqual(0.28);
  });

  it('gives milliseconds per batch and cores busy beside the raw loop, and nothing for older results', () => {
    const run = (host: number, dynamodb: number, sqs: number, baseline: number) => ({
      host: { cpu: { wallSeconds: 2, host, dynamodb, sqs }, batches: 100 },
      baseline: { cpu: { wallSeconds: 1, host: baseline, sqs: 0.1 }, batches: 50 },
    });
    const cpu = cpuPerBatch([run(1, 0.6, 0.2, 0.9), run(1.2, 0.6, 0.2, 0.9), run(1.4, 0.8, 0.2, 0.9)]);
    expect(cpu?.host.median).toBeCloseTo(12);
    expect(cpu?.dynamodb.median).toBeCloseTo(6);
    expect(cpu?.all.median).toBeCloseTo(20);
    expect(cpu?.cores.median).toBeCloseTo(1);
    expect(cpu?.baseline.median).toBeCloseTo(20);
    expect(cpu?.baselineCores.median).toBeCloseTo(1);
    expect(cpuPerBatch([{ host: { batches: 10 } }])).toBeUndefined();

    const summary = { cells: [{ label: 'drain, batch 10 / concurrency 10', cpu }] } as unknown as Summary;
    const table = cpuTable(summary, 2);
    expect(table).toContain('| drain, batch 10 / concurrency 10 | 12.0 [10.0–14.0] | 6.0 [6.0–8.0] |');
    expect(table).toContain('the machine has 2');
    expect(cpuTable({ cells: [{ label: 'old' }] } as unknown as Summary, 2)).toBe('');
  });
});
