/**
 * When a registration is too late for its messages: the runner received them with a short
 * visibility (`RegisterOptions.visibleForMs`), and a batch created after they may have returned
 * to the queue would count an attempt for a message another lane may be receiving.
 */

/**
 * Room a registration leaves before its messages' visibility ends: the call's own transit, and
 * the time to hold the messages once the batch exists.
 */
const REGISTER_BY_ROOM_MS = 2_000;
/** The call's transit, by which the messages' visibility may end sooner than the call says. */
const TRANSIT_MS = 1_000;

/** When a registration is too late for its messages' visibility (`RegisterOptions.visibleForMs`). */
export interface RegistrationClock {
  /** Past the time by which the batch must be created (no attempt is counted then). */
  tooLate(): boolean;
  /** The messages may have become visible again (their hold may have come too late). */
  visibilityEnded(): boolean;
}

export function registrationClock(
  arrivedAt: number,
  visibleForMs: number | undefined,
  now: () => number,
): RegistrationClock {
  if (visibleForMs === undefined) return { tooLate: () => false, visibilityEnded: () => false };
  const visibleAt = arrivedAt + visibleForMs - TRANSIT_MS;
  return {
    tooLate: () => now() > visibleAt - REGISTER_BY_ROOM_MS,
    visibilityEnded: () => now() >= visibleAt,
  };
}
