import { type SupervisionDeps, superviseRound } from '../../delivery/supervision.ts';
import { log } from '../../shared/log.ts';

/**
 * The local Host's supervisor: the AWS supervisor's round (`superviseRound`) on a timer instead
 * of an EventBridge schedule, first at start-up (after the recovery of a dead run's batches) and
 * then every `periodMs`.
 */
export class LocalSupervisor {
  private timer: NodeJS.Timeout | undefined;
  private round: Promise<unknown> | undefined;
  private stopped = false;
  private readonly deps: SupervisionDeps;
  private readonly periodMs: number;

  constructor(deps: SupervisionDeps, periodMs: number) {
    this.deps = deps;
    this.periodMs = periodMs;
  }

  start(): void {
    const tick = async () => {
      if (this.stopped) return;
      this.round = superviseRound(this.deps).then(
        (r) => (r.started > 0 || r.recovered > 0 ? log.info('supervision round', { ...r }) : undefined),
        (err) => log.warn('supervision round failed; retrying', { err }),
      );
      await this.round;
      if (!this.stopped) this.timer = setTimeout(tick, this.periodMs);
    };
    void tick();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    await this.round;
  }
}
