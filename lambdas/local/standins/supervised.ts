import { log } from '../../shared/log.ts';
import type { StandIn } from './child-process.ts';

/**
 * Keeps a stand-in running: if it dies (crash, OOM, someone killed it), it is started again on
 * the same port and data folder, so the Host's clients reconnect by themselves (RC-04). While
 * it is down, calls fail and the executor and dispatcher retry with backoff.
 */
export class SupervisedStandIn {
  private current: StandIn;
  private readonly restart: (port: number) => Promise<StandIn>;
  private readonly onRestart: () => void;
  private stopping = false;
  private watching: Promise<void>;
  restarts = 0;

  private constructor(first: StandIn, restart: (port: number) => Promise<StandIn>, onRestart: () => void) {
    this.current = first;
    this.restart = restart;
    this.onRestart = onRestart;
    this.watching = this.watch();
  }

  static async start(
    start: (port?: number) => Promise<StandIn>,
    onRestart: () => void = () => {},
  ): Promise<SupervisedStandIn> {
    return new SupervisedStandIn(await start(), (port) => start(port), onRestart);
  }

  get name(): string {
    return this.current.name;
  }
  get endpoint(): string {
    return this.current.endpoint;
  }
  get pid(): number {
    return this.current.pid;
  }

  private async watch(): Promise<void> {
    for (;;) {
      await this.current.exited;
      if (this.stopping) return;
      const port = Number(new URL(this.current.endpoint).port);
      log.warn('stand-in exited; restarting it', { standIn: this.current.name, pid: this.current.pid });
      for (let attempt = 0; ; attempt++) {
        if (this.stopping) return;
        try {
          this.current = await this.restart(port);
          this.restarts++;
          this.onRestart();
          log.info('stand-in is back', { standIn: this.current.name, pid: this.current.pid, attempt });
          break;
        } catch (err) {
          log.warn('stand-in restart failed; trying again', { standIn: this.current.name, attempt, err });
          await new Promise((r) => setTimeout(r, Math.min(5000, 250 * 2 ** Math.min(attempt, 5))));
        }
      }
    }
  }

  async stop(): Promise<void> {
    this.stopping = true;
    await this.current.stop();
    await this.watching;
  }
}
