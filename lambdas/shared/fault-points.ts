/**
 * Named crash points for restart tests (RC-02) and the fault-injection suite. An entry of
 * TAKOFORM_CRASH_AT (comma-separated) is `point` (the first time it is reached) or `point@N`
 * (the N-th time); reaching it kills the process with SIGKILL, exactly like `kill -9` at that
 * instant. Unset in production; the cost is then one Map lookup.
 */
const armed = new Map<string, number>();
for (const entry of (process.env.TAKOFORM_CRASH_AT ?? '').split(',')) {
  const [name, nth] = entry.trim().split('@');
  if (name) armed.set(name, nth && /^\d+$/.test(nth) ? Number(nth) : 1);
}
const reached = new Map<string, number>();

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
  /** A dead-letter copy is sent; the original is not yet removed. */
  | 'delivery.after-dead-letter-send';

export function crashPoint(name: CrashPoint): void {
  const at = armed.get(name);
  if (at === undefined) return;
  const n = (reached.get(name) ?? 0) + 1;
  reached.set(name, n);
  if (n >= at) process.kill(process.pid, 'SIGKILL');
}
