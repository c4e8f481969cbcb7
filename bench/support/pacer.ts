/**
 * A producer at a fixed rate: every `tickMs` it starts one send of `rate × tickMs / 1000`
 * messages, on the clock rather than after the previous send, so that a slow send does not lower
 * the rate. At most `maxInFlight` sends run at once; past that the pacer waits and records how far
 * it fell behind its schedule.
 */
import { sleep } from './stats.ts';

export interface PaceResult {
  /** Messages whose send resolved. */
  sent: number;
  failed: number;
  /** The most the pacer ever lagged behind its schedule, ms. */
  maxLagMs: number;
}

export interface PaceOptions {
  rate: number;
  seconds: number;
  tickMs?: number;
  maxInFlight?: number;
  /** Sends `n` messages; resolves when they are accepted. */
  send(n: number): Promise<void>;
}

export async function pace(o: PaceOptions): Promise<PaceResult> {
  const tickMs = o.tickMs ?? 50;
  const perTick = Math.max(1, Math.round((o.rate * tickMs) / 1000));
  const ticks = Math.round((o.seconds * 1000) / tickMs);
  const maxInFlight = o.maxInFlight ?? 32;
  const inFlight = new Set<Promise<void>>();
  const result: PaceResult = { sent: 0, failed: 0, maxLagMs: 0 };
  const startedAt = performance.now();
  for (let i = 0; i < ticks; i++) {
    const due = startedAt + i * tickMs;
    const early = due - performance.now();
    if (early > 0) await sleep(early);
    while (inFlight.size >= maxInFlight) await Promise.race(inFlight);
    result.maxLagMs = Math.max(result.maxLagMs, performance.now() - due);
    const p: Promise<void> = o.send(perTick).then(
      () => {
        result.sent += perTick;
      },
      () => {
        result.failed += perTick;
      },
    );
    const tracked = p.finally(() => inFlight.delete(tracked));
    inFlight.add(tracked);
  }
  await Promise.all(inFlight);
  return result;
}
