/**
 * Throughput budgets per partition. A partition serves its rate a second, and up to one second's
 * worth at once; a request is admitted while the budget is above zero and then pays what it
 * consumed, so the budget may go below zero (a write of more units than a second's worth still
 * passes, once, and the partition is refused until it has paid that back). This is how a hot
 * partition behaves to a caller: refused in bursts, never forever.
 */
export class TokenBucket {
  private level: number;
  private last: number;
  private readonly ratePerSecond: number;
  private readonly capacity: number;

  /** `capacity`: the most it holds (a burst); one second's worth unless an API's quota says more. */
  constructor(ratePerSecond: number, now: number, capacity = ratePerSecond) {
    this.ratePerSecond = ratePerSecond;
    this.capacity = capacity;
    this.level = capacity;
    this.last = now;
  }

  private refill(now: number): void {
    if (now > this.last) {
      this.level = Math.min(this.capacity, this.level + ((now - this.last) / 1000) * this.ratePerSecond);
      this.last = now;
    }
  }

  /**
   * Takes one whole token if there is one: an API call throttled by a token bucket (Step
   * Functions' StartExecution) either gets its token or is refused, and never goes into debt.
   */
  take(now: number): boolean {
    this.refill(now);
    if (this.level < 1) return false;
    this.level -= 1;
    return true;
  }

  /** Whether a request may start now. */
  admits(now: number): boolean {
    this.refill(now);
    return this.level > 0;
  }

  charge(units: number, now: number): void {
    this.refill(now);
    this.level -= units;
  }

  available(now: number): number {
    this.refill(now);
    return this.level;
  }
}

/** A partition's budget and what it consumed: write units, and reads counted as a third of one. */
export interface PartitionUse {
  bucket: TokenBucket;
  writeUnits: number;
  readUnits: number;
  throttles: number;
  firstAt: number;
}

/**
 * One bucket per partition, in write units: 1,000 WCU or 3,000 RCU a second, or a linear mix of
 * both (so a read unit costs a third of a write unit).
 */
export class PartitionBudgets {
  private readonly parts = new Map<string, PartitionUse>();
  private readonly writeUnitsPerSecond: number;
  private readonly readUnitsPerSecond: number;

  constructor(writeUnitsPerSecond: number, readUnitsPerSecond: number) {
    this.writeUnitsPerSecond = writeUnitsPerSecond;
    this.readUnitsPerSecond = readUnitsPerSecond;
  }

  private use(partition: string, now: number): PartitionUse {
    let p = this.parts.get(partition);
    if (!p) {
      p = {
        bucket: new TokenBucket(this.writeUnitsPerSecond, now),
        writeUnits: 0,
        readUnits: 0,
        throttles: 0,
        firstAt: now,
      };
      this.parts.set(partition, p);
    }
    return p;
  }

  /** The first of `partitions` with no budget left (and counts its throttle), or undefined. */
  refusing(partitions: Iterable<string>, now: number): string | undefined {
    for (const partition of partitions) {
      const p = this.use(partition, now);
      if (!p.bucket.admits(now)) {
        p.throttles++;
        return partition;
      }
    }
    return undefined;
  }

  chargeWrite(partition: string, units: number, now: number): void {
    const p = this.use(partition, now);
    p.writeUnits += units;
    p.bucket.charge(units, now);
  }

  chargeRead(partition: string, units: number, now: number): void {
    const p = this.use(partition, now);
    p.readUnits += units;
    p.bucket.charge((units * this.writeUnitsPerSecond) / this.readUnitsPerSecond, now);
  }

  entries(): IterableIterator<[string, PartitionUse]> {
    return this.parts.entries();
  }
}
