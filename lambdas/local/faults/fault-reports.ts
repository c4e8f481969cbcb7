/** What fault injection did, for the tests and the chaos suite's report. */
import { log } from '../../shared/log.ts';
import type { FaultService } from './fault-config.ts';

export type FaultKind =
  | 'throttle'
  | 'serviceError'
  | 'transactionThrottle'
  | 'tooManyRequests'
  | 'unprocessed'
  | 'batchEntryFailure'
  | 'timeout'
  | 'lostAnswer'
  | 'overlap';

export interface InjectedFault {
  service: FaultService;
  label: string;
  operation: string;
  kind: FaultKind;
  /** The error thrown (error faults). */
  error?: string;
  /** Requests, keys or entries withheld from the server, out of `of` (partial faults). */
  withheld?: number;
  of?: number;
  /** Whether the function ran (local invocation faults). */
  ran?: boolean;
  /** What a lost answer's request addressed (key kinds, update expression), for diagnosis. */
  target?: string;
}

const listeners = new Set<(fault: InjectedFault) => void>();

/** Calls `listener` for every fault injected in this process; returns the unsubscribe. */
export function onInjectedFault(listener: (fault: InjectedFault) => void): () => void {
  listeners.add(listener);
  return () => listeners.delete(listener);
}

export function report(fault: InjectedFault): void {
  log.debug('injected fault', { ...fault });
  for (const l of listeners) l(fault);
}
