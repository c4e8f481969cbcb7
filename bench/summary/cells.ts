/** How a measured cell is named: in the results table's settings and in the rows' keys. */
import { fmt } from '../format.ts';
import type { SteadySetting } from '../scenarios/steady.ts';

export const cellKey = (b: number, c: number) => `batch ${b} / concurrency ${c}`;
export const cellId = (b: number, c: number) => `${b}x${c}`;
export const steadyLabel = (s: SteadySetting) =>
  `steady ${fmt(s.rate, 0)} msg/s, ${cellKey(s.batchSize, s.concurrency)}`;

export const steadyId = (s: SteadySetting) => `${s.rate}/s:${cellId(s.batchSize, s.concurrency)}`;

export const sameSetting = (a: SteadySetting, b: SteadySetting) =>
  a.rate === b.rate &&
  a.batchSize === b.batchSize &&
  a.concurrency === b.concurrency &&
  a.maxBatchTimeoutSeconds === b.maxBatchTimeoutSeconds;
