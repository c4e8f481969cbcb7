/**
 * The memory (MB) each Host function gets by default: the one definition shared by the CDK
 * constructs and the bench's pricing, so that the bench bills each function's time at the memory
 * it is deployed with. Pure data, no imports at run time: safe to load from CDK code and bundles.
 */
import type { HostFunctionRole } from './host-concurrency.ts';

export const HOST_FUNCTION_MEMORY_MB = {
  api: 512,
  step: 512,
  /**
   * Every runner waits on its calls (register, settle, finalize) synchronously, and Lambda gives
   * a function CPU in proportion to its memory.
   */
  batchHost: 1024,
  executor: 512,
  supervisor: 512,
  /** A `ModuleWorkerFunction`: the worker's code runs in it, beside the runner. */
  worker: 512,
} as const satisfies Record<HostFunctionRole | 'worker', number>;

export type HostFunctionMemoryRole = keyof typeof HOST_FUNCTION_MEMORY_MB;
