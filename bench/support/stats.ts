import { existsSync, readFileSync } from 'node:fs';

/** The q-quantile (0..1) of `values` by linear interpolation between closest ranks. */
export function quantile(values: readonly number[], q: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const pos = (sorted.length - 1) * q;
  const lo = Math.floor(pos);
  const hi = Math.ceil(pos);
  const a = sorted[lo] as number;
  const b = sorted[hi] as number;
  return a + (b - a) * (pos - lo);
}

export const median = (values: readonly number[]) => quantile(values, 0.5);

/** Median, min and max of one figure over several runs. */
export interface Spread {
  median: number;
  min: number;
  max: number;
  runs: number;
}

export function spread(values: readonly number[]): Spread {
  const finite = values.filter((v) => Number.isFinite(v));
  if (finite.length === 0) return { median: Number.NaN, min: Number.NaN, max: Number.NaN, runs: 0 };
  return { median: median(finite), min: Math.min(...finite), max: Math.max(...finite), runs: finite.length };
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Polls `probe` every `everyMs` until it returns true; false when `timeoutMs` passed first. */
export async function until(probe: () => boolean, timeoutMs: number, everyMs = 5): Promise<boolean> {
  const deadline = performance.now() + timeoutMs;
  while (!probe()) {
    if (performance.now() > deadline) return false;
    await sleep(everyMs);
  }
  return true;
}

/** JSON lines a worker appended (none when the file does not exist yet). */
export function readRecords<T>(file: string): T[] {
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as T);
}

/** Rounds for display and JSON (keeps raw samples readable without losing what matters). */
export const round = (v: number, digits = 3) => (Number.isFinite(v) ? Number(v.toFixed(digits)) : v);
