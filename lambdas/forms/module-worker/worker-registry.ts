/** The handlers the ModuleWorker 0.3.0 runtime ABI knows. */
export type HandlerName = 'fetch' | 'scheduled' | 'queue';

/** What the Host knows about a worker's code, wherever that code lives. */
export interface WorkerCode {
  /** Identifies the code now active (a local module's digest, or a deployed registration). */
  deploymentUid: string;
  /** Callable own properties of the module's default export among fetch/scheduled/queue. */
  handlers: readonly HandlerName[];
}

/**
 * Where worker code is found: locally the `--workers-dir` layout, on AWS the registration
 * records that the ModuleWorkerFunction construct writes at deploy time.
 */
export interface WorkerRegistry {
  /** The active code of (space, name), or undefined when none exists or it does not load. */
  lookup(space: string, name: string): Promise<WorkerCode | undefined>;
  /** Where this registry looks for the code of (space, name), said for someone who must put it there. */
  describeMissing?(space: string, name: string): string;
}
