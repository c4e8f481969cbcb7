import type { ResourceObserver } from '../engine/resource-observer.ts';
import { log } from '../shared/log.ts';
import { Periodic } from './periodic.ts';

/** The local Host's timer for the background refresh of `observed` (AWS: the supervisor's minute). */
export function localResourceRefresh(observer: ResourceObserver, periodMs: number): Periodic {
  return new Periodic(
    () => observer.observeOnce().catch((err) => log.warn('refresh of observed failed; retrying', { err })),
    periodMs,
  );
}
