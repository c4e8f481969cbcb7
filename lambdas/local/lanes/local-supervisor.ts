import { type SupervisionDeps, superviseRound } from '../../delivery/supervision.ts';
import { log } from '../../shared/log.ts';
import { Periodic } from '../periodic.ts';

/**
 * The local Host's supervisor: the AWS supervisor's round (`superviseRound`) on a timer instead
 * of an EventBridge schedule, first at start-up (after the recovery of a dead run's batches) and
 * then every `periodMs`.
 */
export class LocalSupervisor {
  private readonly timer: Periodic;

  constructor(deps: SupervisionDeps, periodMs: number) {
    this.timer = new Periodic(
      () =>
        superviseRound(deps, Date.now()).then(
          (r) => (r.started > 0 || r.recovered > 0 ? log.info('supervision round', { ...r }) : undefined),
          (err) => log.warn('supervision round failed; retrying', { err }),
        ),
      periodMs,
    );
  }

  start(): void {
    this.timer.start();
  }

  async stop(): Promise<void> {
    await this.timer.stop();
  }
}
