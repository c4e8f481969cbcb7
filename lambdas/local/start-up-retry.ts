/**
 * Start-up steps of the local Host that read and write the table (recovering what an earlier run
 * left): each is idempotent, so a transient error — a throttle, a lost answer the SDK's own
 * retries did not outlast — is met by trying the step again, rather than by a Host that exits.
 */
import { log } from '../shared/log.ts';

/** Tries in all; the waits between them double from 0.5 s (7.5 s at most before the last). */
export const START_UP_TRIES = 5;

export async function retriedAtStartUp<T>(
  what: string,
  step: () => Promise<T>,
  opts: { tries?: number; firstWaitMs?: number } = {},
): Promise<T> {
  const tries = opts.tries ?? START_UP_TRIES;
  const firstWaitMs = opts.firstWaitMs ?? 500;
  for (let attempt = 1; ; attempt++) {
    try {
      return await step();
    } catch (err) {
      if (attempt >= tries) throw err;
      log.warn(`start-up: ${what} failed; trying again`, { attempt, of: tries, err });
      await new Promise((resolve) => setTimeout(resolve, firstWaitMs * 2 ** (attempt - 1)));
    }
  }
}
