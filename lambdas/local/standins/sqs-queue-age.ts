import type { QueueTarget } from '../../delivery/ports.ts';

/** The local SQS stand-in's stand-in for CloudWatch's ApproximateAgeOfOldestMessage (sqs-server-main.ts). */
export const OLDEST_AGE_PATH = '/_takoform/oldest-message-age';

/**
 * The age in seconds of a local queue's oldest message that is due (visible or in flight; not
 * delayed), read from the SQS stand-in, which knows every message's send time. `endpoint` is
 * read per call: a restarted stand-in listens elsewhere.
 */
export function standInOldestAge(endpoint: () => string) {
  return async (target: QueueTarget): Promise<number | undefined> => {
    const url = `${endpoint()}${OLDEST_AGE_PATH}?queue=${encodeURIComponent(target.sqsUrl)}`;
    const res = await fetch(url, { signal: AbortSignal.timeout(5_000) });
    if (!res.ok) return undefined;
    const body = (await res.json()) as { ageSeconds?: unknown };
    return typeof body.ageSeconds === 'number' ? body.ageSeconds : undefined;
  };
}
