import type { OperationExecutor } from '../engine/executor.ts';
import { log } from '../shared/log.ts';

/**
 * The local stand-in for the AWS trigger-plus-sweep: runs due Operations, waking at once when
 * one is accepted and otherwise every `intervalMs`. Store outages are logged and retried.
 */
export class ExecutorLoop {
  private readonly executor: OperationExecutor;
  private readonly intervalMs: number;
  private wake: (() => void) | undefined;
  private pending = false;
  private running: Promise<void> | undefined;
  private stopped = false;

  constructor(executor: OperationExecutor, intervalMs = 250) {
    this.executor = executor;
    this.intervalMs = intervalMs;
  }

  start(): void {
    this.running = this.loop();
  }

  /** Called on acceptance. */
  poke(): void {
    this.pending = true;
    this.wake?.();
  }

  private async loop(): Promise<void> {
    let failures = 0;
    while (!this.stopped) {
      this.pending = false;
      let worked = 0;
      try {
        worked = await this.executor.runDue();
        failures = 0;
      } catch (err) {
        failures++;
        if (failures === 1 || failures % 20 === 0)
          log.warn('executor pass failed; retrying', { err, failures });
      }
      if (this.stopped) break;
      if (worked > 0 || this.pending) continue;
      const delay = failures ? Math.min(5000, this.intervalMs * 2 ** Math.min(failures, 5)) : this.intervalMs;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, delay);
        this.wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.wake = undefined;
    }
  }

  /** Lets the current pass finish (its leases stay valid), then stops. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.wake?.();
    await this.running;
  }
}
