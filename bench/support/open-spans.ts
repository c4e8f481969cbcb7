/**
 * Lambda invocations and Express executions still running, so that a measurement window can be
 * billed the part of each that fell inside it. The meter otherwise bills a duration where it ends,
 * which suits a drain (a worker invocation that outlives it still counts for it) but not a window
 * cut out of a stream: a lane's worker invocation runs up to 30 s and its Express execution for
 * minutes, so a window of a minute would get one of them whole or none.
 */

interface Span {
  /** The Lambda role, or `EXPRESS` for an execution of the Express dispatcher. */
  key: string;
  /** `performance.now()` of the span's start, or of the last cut that billed it. */
  since: number;
  /** ms already billed to earlier windows. */
  billed: number;
}

export const EXPRESS_SPAN = '(express)';

export class OpenSpans {
  private next = 0;
  private readonly open = new Map<number, Span>();

  start(key: string, now = performance.now()): number {
    this.next += 1;
    this.open.set(this.next, { key, since: now, billed: 0 });
    return this.next;
  }

  /** Forgets the span; returns what earlier windows were billed of it (0 for no span). */
  end(id: number | undefined): number {
    if (id === undefined) return 0;
    const span = this.open.get(id);
    this.open.delete(id);
    return span?.billed ?? 0;
  }

  /** What each open span ran since it started or was last cut, by key; each is billed up to `now`. */
  cut(now = performance.now()): { key: string; ms: number }[] {
    const out: { key: string; ms: number }[] = [];
    for (const span of this.open.values()) {
      const ms = Math.max(0, now - span.since);
      out.push({ key: span.key, ms });
      span.billed += ms;
      span.since = now;
    }
    return out;
  }
}
