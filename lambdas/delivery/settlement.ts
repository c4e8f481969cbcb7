/** Settlement calls from a worker: first settlement wins, each durable before it is answered. */

import { crashPoint } from '../shared/crash-points.ts';
import { log } from '../shared/log.ts';
import { type DeliveryContext, hashCredential } from './delivery-context.ts';
import type { DeliveryStore } from './delivery-store.ts';
import { NamedError } from './limits.ts';
import type { SettleAnswer, SettleCall } from './settlement-protocol.ts';

export class Settlements {
  private readonly c: DeliveryContext;

  constructor(c: DeliveryContext) {
    this.c = c;
  }

  /** One settlement call from a worker (DL-03, DL-04, DL-08, DL-09). */
  async settle(batchId: string, credential: string, call: SettleCall): Promise<void> {
    const hash = hashCredential(credential);
    let result: Awaited<ReturnType<DeliveryStore['settle']>>;
    try {
      result = await this.c.o.store.settle(batchId, hash, call);
    } catch (err) {
      if (err instanceof NamedError) throw err;
      log.warn('settlement could not be recorded', { batchId, err });
      await this.markDoubtful(batchId);
      throw new NamedError(
        'backend_unavailable',
        'the settlement could not be recorded; it is not in effect',
      );
    }
    crashPoint('delivery.after-settle');
    if (result === 'unknown_batch')
      throw new NamedError('unknown_batch', 'this batch is not open for settlement');
    if (result === 'already_settled')
      throw new NamedError('already_settled', 'this message is already settled');
  }

  /**
   * A group of settlement calls of one batch, applied in order with the answers `settle` would
   * give each in turn, in as few writes as the store can (DL-03, DL-04, DL-08, DL-09). A call
   * whose write failed answers `backend_unavailable` and marks the batch doubtful.
   */
  async settleMany(batchId: string, credential: string, calls: SettleCall[]): Promise<SettleAnswer[]> {
    const hash = hashCredential(credential);
    let results: Awaited<ReturnType<DeliveryStore['settleMany']>>;
    let cause: unknown;
    try {
      results = await this.c.o.store.settleMany(batchId, hash, calls);
    } catch (err) {
      if (err instanceof NamedError) throw err;
      cause = err;
      results = calls.map(() => 'write_failed');
    }
    const failed = results.filter((r) => r === 'write_failed').length;
    if (failed > 0) {
      log.warn('settlements could not be recorded', { batchId, failed, ...(cause ? { err: cause } : {}) });
      await this.markDoubtful(batchId);
    }
    if (results.includes('ok')) crashPoint('delivery.after-settle');
    return results.map((r) => (r === 'write_failed' ? 'backend_unavailable' : r));
  }

  /**
   * Marks the batch doubtful, so its finalisation never acknowledges implicitly (DL-08). If even
   * that write fails, the runner, which saw the settlement fail, finalises as after a throw.
   */
  private async markDoubtful(batchId: string): Promise<void> {
    await this.c.o.store.markDoubtful(batchId).catch((err: unknown) =>
      log.warn('could not mark a batch doubtful; its runner finalises it as after a throw', {
        batchId,
        err,
      }),
    );
  }
}
