/**
 * Runs `round` at once and then `periodMs` after each round ends (never two at a time), until
 * stopped; `stop` waits for the round under way. A round must not throw.
 */
export class Periodic {
  private timer: NodeJS.Timeout | undefined;
  private current: Promise<unknown> | undefined;
  private stopped = false;
  private readonly round: () => Promise<unknown>;
  private readonly periodMs: number;

  constructor(round: () => Promise<unknown>, periodMs: number) {
    this.round = round;
    this.periodMs = periodMs;
  }

  start(): void {
    const tick = async () => {
      if (this.stopped) return;
      this.current = this.round();
      await this.current;
      if (!this.stopped) this.timer = setTimeout(tick, this.periodMs);
    };
    void tick();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    await this.current;
  }
}
