import { memorySupervisorLedger, type SupervisionDeps, superviseRound } from '../../delivery/supervision.ts';
import { log } from '../../shared/log.ts';
import { Periodic } from '../periodic.ts';

/**
 * The local Host's supervisor: the AWS supervisor's round (`superviseRound`) on a timer instead
 * of an EventBridge schedule, first at start-up (after the recovery of a dead run's batches) and
 * then every `periodMs`. A round stops starting consumer visits once a period has passed, and
 * the next goes on after the last consumer visited (the ledger is this process's: its timer never
 * runs two rounds at once).
 */
export class LocalSupervisor {
  private readonly timer: Periodic;

  constructor(deps: SupervisionDeps, periodMs: number) {
    const withLedger = { ...deps, ledger: deps.ledger ?? memorySupervisorLedger() };
    this.timer = new Periodic(
      () =>
        superviseRound(withLedger, Date.now(), { budgetMs: periodMs }).then(
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
