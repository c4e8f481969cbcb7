/**
 * The last hour of each queue's counts, for the console's chart. SQS keeps no history, so the
 * local Host keeps it in memory (`QueueHistory`); on AWS it is read from SQS's CloudWatch
 * metrics (`adapters/aws/cloudwatch-queue-history.ts`).
 */
import type { QueueTarget } from '../delivery/ports.ts';

export interface QueueSample {
  /** Epoch milliseconds of the sample. */
  at: number;
  visible: number;
  inFlight: number;
  delayed: number;
  /**
   * Messages acknowledged since the sample before: locally those a finished batch deleted; on
   * AWS SQS's NumberOfMessagesDeleted, which also counts originals deleted after a move.
   */
  acknowledged: number;
}

/** Where the chart's data comes from; the operator endpoint `…/queues/{uid}/history` reads it. */
export interface QueueHistorySource {
  view(target: QueueTarget): Promise<QueueHistoryView>;
  /** Told how many messages a finished batch acknowledged (sources that count them). */
  acknowledged?(queueUid: string, count: number): void;
}

export interface QueueHistoryView {
  /** false where this Host keeps no history (on AWS: see the CloudWatch dashboard). */
  available: boolean;
  intervalSeconds: number | null;
  windowSeconds: number;
  samples: QueueSample[];
}

export const HISTORY_WINDOW_MS = 3_600_000;
const WINDOW_MS = HISTORY_WINDOW_MS;
const MAX_SAMPLES = 720;
const MAX_QUEUES = 500;

interface Track {
  samples: QueueSample[];
  /** Acknowledged since the last sample. */
  pendingAcks: number;
  /** Last time anyone recorded into or asked about this queue (eviction order). */
  touched: number;
}

/**
 * The local Host's memory of queue counts. Bounded: at most `MAX_QUEUES` queues and
 * `MAX_SAMPLES` samples each, none older than the window; nothing is written anywhere, so a
 * restart starts empty.
 */
export class QueueHistory implements QueueHistorySource {
  private readonly tracks = new Map<string, Track>();
  private readonly clock: () => number;
  readonly intervalSeconds: number;

  constructor(intervalSeconds: number, clock: () => number = Date.now) {
    this.intervalSeconds = intervalSeconds;
    this.clock = clock;
  }

  /** Counts messages a finished batch acknowledged; they show in the queue's next sample. */
  acknowledged(queueUid: string, count: number): void {
    if (count > 0) this.track(queueUid).pendingAcks += count;
  }

  /** Queues to sample besides those with a consumer: every queue someone asked about. */
  watched(): string[] {
    return [...this.tracks.keys()];
  }

  record(queueUid: string, counts: Omit<QueueSample, 'at' | 'acknowledged'>): void {
    const t = this.track(queueUid);
    const now = this.clock();
    t.samples.push({ at: now, ...counts, acknowledged: t.pendingAcks });
    t.pendingAcks = 0;
    const from = t.samples.findIndex((s) => s.at >= now - WINDOW_MS);
    const keep = Math.max(from === -1 ? t.samples.length : from, t.samples.length - MAX_SAMPLES);
    if (keep > 0) t.samples.splice(0, keep);
  }

  /** Forgets a queue (deleted). */
  forget(queueUid: string): void {
    this.tracks.delete(queueUid);
  }

  async view(target: QueueTarget): Promise<QueueHistoryView> {
    return this.viewOf(target.queueUid);
  }

  viewOf(queueUid: string): QueueHistoryView {
    const t = this.track(queueUid);
    const since = this.clock() - WINDOW_MS;
    return {
      available: true,
      intervalSeconds: this.intervalSeconds,
      windowSeconds: WINDOW_MS / 1000,
      samples: t.samples.filter((s) => s.at >= since),
    };
  }

  private track(queueUid: string): Track {
    let t = this.tracks.get(queueUid);
    if (!t) {
      if (this.tracks.size >= MAX_QUEUES) this.evictOldest();
      t = { samples: [], pendingAcks: 0, touched: 0 };
      this.tracks.set(queueUid, t);
    }
    t.touched = this.clock();
    return t;
  }

  private evictOldest(): void {
    let oldest: [string, number] | undefined;
    for (const [uid, t] of this.tracks) if (!oldest || t.touched < oldest[1]) oldest = [uid, t.touched];
    if (oldest) this.tracks.delete(oldest[0]);
  }
}

/** What a Host without history answers. */
export const NO_HISTORY: QueueHistoryView = {
  available: false,
  intervalSeconds: null,
  windowSeconds: WINDOW_MS / 1000,
  samples: [],
};
