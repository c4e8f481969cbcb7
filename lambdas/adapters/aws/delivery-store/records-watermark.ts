/**
 * Whether a queue may hold attempts records, as one time per queue (`QSTATE#<queue>`,
 * `recordsUntil`): every record expires by then. A registration reads it beside its other reads
 * and looks the received messages' records up only while it lies ahead.
 *
 * A count of outstanding records did the same, but it was written in a transaction with every
 * record created or cleared, so a retry storm on one queue met itself on that one item (two
 * write units each, a thousand a second per partition), and a record that expired or was purged
 * was never taken off it, so the queue paid the lookups for good. The time only ever rises, is
 * raised with an hour to spare, so a process writes it about once an hour rather than once a
 * record, and it runs out on its own when the last record could have expired.
 */
import { marshall } from '@aws-sdk/util-dynamodb';
import { recordExpiry } from '../../../delivery/limits.ts';
import { log } from '../../../shared/log.ts';
import { TABLE_KEYS } from '../../../shared/table-schema.ts';
import { conditionalUpdate } from '../dynamodb-conditional-update.ts';
import type { DeliveryTable, StoredItem } from './delivery-table.ts';
import { deliveryKeys } from './items.ts';

const { pk: PK } = TABLE_KEYS;
const QSTATE = 'QSTATE#';

/** Raised this much past the record that asked, so the next hour of records finds it covered. */
const SLACK_SECONDS = 3_600;
/** Queues whose time this process knows, at most (an entry is only a hint that saves a write). */
const REMEMBERED = 10_000;

export class RecordsWatermark {
  /** The time each queue's item is known to hold at least (seconds). */
  private readonly known = new Map<string, number>();
  /** Raises under way, so the records a storm writes at once make one. */
  private readonly raising = new Map<string, Promise<void>>();

  private readonly t: DeliveryTable;

  constructor(t: DeliveryTable) {
    this.t = t;
  }

  /**
   * Makes the queue's time cover a record expiring at `expiresAtSeconds`, before that record is
   * written: a registration that can receive the record's message then reads a time ahead.
   */
  async cover(queueUid: string, expiresAtSeconds: number): Promise<void> {
    if ((this.known.get(queueUid) ?? 0) >= expiresAtSeconds) return;
    const pending = this.raising.get(queueUid);
    if (pending) {
      await pending;
      if ((this.known.get(queueUid) ?? 0) >= expiresAtSeconds) return;
    }
    const raise = this.raise(queueUid, expiresAtSeconds + SLACK_SECONDS).finally(() =>
      this.raising.delete(queueUid),
    );
    this.raising.set(queueUid, raise);
    await raise;
  }

  /** Whether the queue's item, as a registration read it, says records may exist at `nowMs`. */
  mayHoldRecords(item: StoredItem | undefined, nowMs: number): boolean {
    if (typeof item?.recordsUntil === 'number') return item.recordsUntil * 1000 > nowMs;
    // Written by an earlier Host, which counted records instead: trust the count, and set a time
    // that covers every record it could have written (none expires later than one written now).
    const counted = Number(item?.outstanding ?? 0) > 0;
    const queueUid = String(item?.[PK] ?? '').slice(QSTATE.length);
    if (counted && queueUid) {
      this.raise(queueUid, recordExpiry(nowMs)).catch((err: unknown) =>
        log.warn('could not set a queue’s records time; its count is read until it is', { queueUid, err }),
      );
    }
    return counted;
  }

  private async raise(queueUid: string, until: number): Promise<void> {
    const out = await conditionalUpdate(this.t.client, this.t.table, deliveryKeys.queueState(queueUid), {
      UpdateExpression: 'SET recordsUntil = :u',
      // Never lowered: a process that raised it further meanwhile wins.
      ConditionExpression: 'attribute_not_exists(recordsUntil) OR recordsUntil < :u',
      ExpressionAttributeValues: marshall({ ':u': until }),
      ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
    });
    const held = out.ok ? until : Number(out.old?.recordsUntil ?? 0);
    if (this.known.size >= REMEMBERED) this.known.clear();
    this.known.set(queueUid, Math.max(this.known.get(queueUid) ?? 0, held));
  }
}
