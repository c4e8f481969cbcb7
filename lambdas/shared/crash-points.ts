/**
 * Named crash points: places where the restart tests and the chaos suite kill the Host as
 * `kill -9` would, to prove what survives (RC-02). The core only marks the points; nothing happens
 * at them unless the local Host armed them (`local/faults/crash-at.ts`, from its environment).
 * The deployed functions never import that module, so their bundles cannot crash on purpose.
 */
export type CrashPoint =
  | 'operation.after-accept'
  | 'operation.after-dispatch-mark'
  | 'operation.after-backend'
  | 'operation.after-settle'
  /** A batch is registered (durable) and about to be handed to the worker. */
  | 'delivery.after-register'
  /** A settlement is durable; the worker has not been told yet. */
  | 'delivery.after-settle'
  /** Some decisions of a finalised batch are applied, not all. */
  | 'delivery.mid-finalize'
  /** A finalisation claimed its visibility changes; SQS has not been asked yet. */
  | 'delivery.after-release-claim'
  /** A dead-letter copy is sent; the original is not yet removed. */
  | 'delivery.after-dead-letter-send';

let reach: ((name: CrashPoint) => void) | undefined;

/** Marks that `name` is reached. */
export function crashPoint(name: CrashPoint): void {
  reach?.(name);
}

/** Installs what happens at crash points (the local Host's crash-at, or a test's). */
export function armCrashPoints(at: (name: CrashPoint) => void): void {
  reach = at;
}
