/**
 * CPU time spent by the bench process (the Host, its worker threads and the raw loops run here)
 * and by the two stand-ins, between two points: on a machine where CPU is what runs out, CPU per
 * batch says what a figure is made of, where wall time says only that it is slow. Linux only
 * (/proc); elsewhere the stand-ins' share is absent.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';

export interface CpuSpent {
  wallSeconds: number;
  /** CPU seconds of the bench process (every thread). */
  host: number;
  /** CPU seconds of DynamoDB Local and of the SQS stand-in; absent without /proc. */
  dynamodb?: number;
  sqs?: number;
}

interface CpuMark {
  at: number;
  host: number;
  dynamodb?: number;
  sqs?: number;
}

let standIns: { dynamodb: number; sqs: number } | undefined;
let ticksPerSecond: number | undefined;

/** Called once the stand-ins run, so every scenario can read their CPU time. */
export function measureStandIns(pids: { dynamodb: number; sqs: number }): void {
  standIns = pids;
}

function clockTicks(): number {
  if (ticksPerSecond === undefined) {
    try {
      ticksPerSecond = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      ticksPerSecond = 100;
    }
  }
  return ticksPerSecond;
}

/** utime + stime of a process, in seconds (fields 14 and 15 of /proc/<pid>/stat). */
function processSeconds(pid: number): number | undefined {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ');
    if (!fields) return undefined;
    return (Number(fields[11]) + Number(fields[12])) / clockTicks();
  } catch {
    return undefined;
  }
}

export function cpuMark(): CpuMark {
  const { user, system } = process.cpuUsage();
  return {
    at: performance.now(),
    host: (user + system) / 1e6,
    ...(standIns ? { dynamodb: processSeconds(standIns.dynamodb), sqs: processSeconds(standIns.sqs) } : {}),
  };
}

export function cpuSince(from: CpuMark, to: CpuMark = cpuMark()): CpuSpent {
  const delta = (a?: number, b?: number) => (a === undefined || b === undefined ? undefined : b - a);
  const dynamodb = delta(from.dynamodb, to.dynamodb);
  const sqs = delta(from.sqs, to.sqs);
  return {
    wallSeconds: (to.at - from.at) / 1000,
    host: to.host - from.host,
    ...(dynamodb === undefined ? {} : { dynamodb }),
    ...(sqs === undefined ? {} : { sqs }),
  };
}

/** Every process's CPU seconds together. */
export const totalCpu = (c: CpuSpent): number => c.host + (c.dynamodb ?? 0) + (c.sqs ?? 0);

/**
 * A fixed single-thread workload (hashing and JSON, what the Host's SDK calls spend CPU on),
 * timed in milliseconds. The machine is shared and its speed drifts (the same commit measured
 * 1.8× slower half an hour apart): runs are compared across time by this, and figures within a
 * run by their same-run baselines. Best of three, so a stray pause does not count.
 */
export function machineProbeMs(): number {
  const doc = JSON.stringify({
    items: Array.from({ length: 500 }, (_, i) => ({ id: `m-${i}`, n: i, tag: 'x'.repeat(64) })),
  });
  let best = Number.POSITIVE_INFINITY;
  for (let round = 0; round < 3; round++) {
    const start = performance.now();
    for (let i = 0; i < 200; i++) {
      createHash('sha256').update(doc).digest();
      JSON.parse(doc);
    }
    best = Math.min(best, performance.now() - start);
  }
  return best;
}
