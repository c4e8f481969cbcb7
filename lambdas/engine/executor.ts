import { crashPoint } from '../shared/crash-points.ts';
import { log } from '../shared/log.ts';
import type { FormRegistry, Outcome } from './forms.ts';
import { newToken } from './ids.ts';
import type { OperationRecord } from './model.ts';
import type { HostStore, Settlement } from './ports.ts';

export interface ExecutorOptions {
  store: HostStore;
  forms: FormRegistry;
  clock?: () => number;
  /** How long a claim protects an Operation from other executors. */
  leaseMs?: number;
  /** Upper bound of the retry backoff after an unknown outcome. */
  maxBackoffMs?: number;
}

/**
 * Runs accepted Operations in the background (never from a GET). Each step: claim with a lease,
 * record possible dispatch, call the backend (execute first time, reconcile after a possible
 * dispatch), then settle with a compare-and-set on the lease token (HA-15, RC-02).
 */
export class OperationExecutor {
  private readonly store: HostStore;
  private readonly forms: FormRegistry;
  private readonly clock: () => number;
  private readonly leaseMs: number;
  private readonly maxBackoffMs: number;

  constructor(opts: ExecutorOptions) {
    this.store = opts.store;
    this.forms = opts.forms;
    this.clock = opts.clock ?? Date.now;
    this.leaseMs = opts.leaseMs ?? 60_000;
    this.maxBackoffMs = opts.maxBackoffMs ?? 30_000;
  }

  /** Runs every due Operation once; returns how many it worked on. */
  async runDue(limit = 25): Promise<number> {
    const due = await this.store.dueOperations(this.clock(), limit);
    let worked = 0;
    await Promise.all(
      due.map(async ({ id, status }) => {
        if (await this.runOne(id, status)) worked++;
      }),
    );
    return worked;
  }

  /** One step of one Operation, if it can be claimed. Returns false when another executor has it. */
  async runOne(id: string, from: OperationRecord['status']): Promise<boolean> {
    const token = newToken();
    const op = await this.store.claimOperation(id, from, token, this.clock(), this.leaseMs);
    if (!op) return false;
    const form = this.forms.get(op.form);
    if (!form) {
      await this.settle(op, token, {
        status: op.dispatchPossible ? 'reconciling' : 'failed',
        effect: op.dispatchPossible ? 'unknown' : 'none',
        error: { code: 'unsupported_form', message: 'this Host no longer serves the Form' },
        nextAttemptAt: this.clock() + this.maxBackoffMs,
      });
      return true;
    }
    const reconcile = op.dispatchPossible;
    if (!reconcile && !(await this.store.markDispatch(op.id, token, this.clock()))) return true;
    crashPoint('operation.after-dispatch-mark');
    const exec = {
      operationId: op.id,
      action: op.action,
      resourceUid: op.resourceUid,
      space: op.space,
      name: op.name,
      generation: op.generation,
      spec: op.spec,
      attempt: op.attempts,
    };
    let outcome: Outcome;
    try {
      outcome = reconcile ? await form.backend.reconcile(exec) : await form.backend.execute(exec);
    } catch (err) {
      log.warn('backend call failed; the outcome is unknown', { operationId: op.id, err });
      outcome = { kind: 'unknown', code: 'outcome_unconfirmed' };
    }
    crashPoint('operation.after-backend');
    await this.settle(op, token, await this.settlementOf(op, outcome));
    crashPoint('operation.after-settle');
    return true;
  }

  private backoff(attempts: number): number {
    const base = Math.min(this.maxBackoffMs, 500 * 2 ** Math.min(attempts, 16));
    return Math.round(base / 2 + Math.random() * (base / 2));
  }

  private async settlementOf(op: OperationRecord, outcome: Outcome): Promise<Settlement> {
    const now = this.clock();
    switch (outcome.kind) {
      case 'complete':
        return {
          status: 'succeeded',
          effect: 'complete',
          error: undefined,
          observed: outcome.observed,
          output: outcome.output,
          releasedReferences: await this.releasedOnSuccess(op),
          releasedClaims: op.action === 'delete' ? await this.store.listClaims(op.resourceUid) : [],
        };
      case 'partial':
        return {
          status: 'failed',
          effect: 'partial',
          error: { code: outcome.code, message: outcome.message },
          observed: outcome.observed,
          output: outcome.output,
        };
      case 'no_effect':
        return { status: 'failed', effect: 'none', error: { code: outcome.code, message: outcome.message } };
      case 'continue':
        return {
          status: 'reconciling',
          effect: 'unknown',
          error: undefined,
          nextAttemptAt: now + (outcome.delayMs ?? 1000),
        };
      case 'unknown':
        return {
          status: 'reconciling',
          effect: 'unknown',
          error: {
            code: outcome.code ?? 'outcome_unconfirmed',
            message: outcome.message ?? 'the backend result is being confirmed',
          },
          nextAttemptAt: now + this.backoff(op.attempts),
        };
    }
  }

  /** References the Resource no longer needs once this Operation succeeded. */
  private async releasedOnSuccess(op: OperationRecord): Promise<string[]> {
    const held = await this.store.listReferences(op.resourceUid);
    if (op.action === 'delete') return held;
    const form = this.forms.get(op.form);
    const wanted = new Set((form?.references?.(op.spec) ?? []).map((r) => r.resourceUid));
    return held.filter((uid) => !wanted.has(uid));
  }

  private async settle(op: OperationRecord, token: string, s: Settlement): Promise<void> {
    const ok = await this.store.settleOperation(op, token, this.clock(), s);
    if (!ok)
      log.warn('lease lost before settling; another executor owns the Operation', { operationId: op.id });
  }
}
