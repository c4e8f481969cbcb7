/**
 * TAKOFORM_CRASH_AT for the local Host: a comma-separated list of crash points, each `point` (the
 * first time it is reached) or `point@N` (the N-th time). Reaching one kills the process with
 * SIGKILL, exactly like `kill -9` at that instant.
 */
import { armCrashPoints, type CrashPoint } from '../../shared/crash-points.ts';

export const CRASH_AT_ENV = 'TAKOFORM_CRASH_AT';

/** Arms the points `env` names; does nothing when it names none. */
export function armCrashAt(env: NodeJS.ProcessEnv = process.env): void {
  const armed = new Map<string, number>();
  for (const entry of (env[CRASH_AT_ENV] ?? '').split(',')) {
    const [name, nth] = entry.trim().split('@');
    if (name) armed.set(name, nth && /^\d+$/.test(nth) ? Number(nth) : 1);
  }
  if (armed.size === 0) return;
  const reached = new Map<string, number>();
  armCrashPoints((name: CrashPoint) => {
    const at = armed.get(name);
    if (at === undefined) return;
    const n = (reached.get(name) ?? 0) + 1;
    reached.set(name, n);
    if (n >= at) process.kill(process.pid, 'SIGKILL');
  });
}
