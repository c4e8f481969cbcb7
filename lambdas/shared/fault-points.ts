/**
 * Named crash points for restart tests (RC-02) and the fault-injection suite. A point listed in
 * TAKOFORM_CRASH_AT (comma-separated) kills the process with SIGKILL when reached, exactly like
 * `kill -9` at that instant. Unset in production; reading it once keeps the cost to a Set lookup.
 */
const armed = new Set(
  (process.env.TAKOFORM_CRASH_AT ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean),
);

export type CrashPoint =
  | 'operation.after-accept'
  | 'operation.after-dispatch-mark'
  | 'operation.after-backend'
  | 'operation.after-settle';

export function crashPoint(name: CrashPoint): void {
  if (armed.size > 0 && armed.has(name)) process.kill(process.pid, 'SIGKILL');
}
