/**
 * Settling messages of an open batch on its head: one conditional write per call, or one write
 * for a run of per-message calls on distinct indexes, with no read first.
 */
import { marshall } from '@aws-sdk/util-dynamodb';
import type { GroupSettleResult, SettleResult } from '../../../delivery/delivery-store.ts';
import { codeOf } from '../../../delivery/delivery-store.ts';
import type { SettleCall } from '../../../delivery/settlement-protocol.ts';
import { log } from '../../../shared/log.ts';
import { TABLE_KEYS } from '../../../shared/table-schema.ts';
import { writeToken } from '../write-token.ts';
import { type DeliveryTable, updateItem } from './delivery-table.ts';
import { deliveryKeys } from './items.ts';

const { pk: PK } = TABLE_KEYS;

/**
 * The head field holding the token of the last settlement write (`write-token.ts`): a write whose
 * answer was lost and whose retry fails its condition finds its own token there, so a settlement
 * that was recorded answers `ok`, never `already_settled`. One field, not one per message (which
 * would add bytes to every write of a large head): the runner has one settlement call of a batch
 * in flight at a time (`settle-coalescer.ts`), so no other settlement of the batch lands between
 * a try and the SDK's retry of it — unless from a call the runner stopped waiting for, whose
 * answer then reaches no one.
 */
const SETTLE_TOKEN = 'settleToken';

/**
 * Per-message settlements one combined write may carry: its condition grows by about 40
 * characters per message, so 50 keep it near 2 KB, well under DynamoDB's 4 KB expression limit.
 */
export const COMBINED_SETTLE_MAX = 50;

type PerMessageCall = Extract<SettleCall, { index: number }>;
const isPerMessage = (call: SettleCall): call is PerMessageCall =>
  call.kind === 'ack' || call.kind === 'retry';
const validIndex = (call: PerMessageCall) => Number.isInteger(call.index) && call.index >= 0;

/**
 * Splits a group, keeping its order, into parts that are either one call (a batch-level call, an
 * invalid index) or up to COMBINED_SETTLE_MAX per-message calls on distinct indexes, which one
 * write can settle together exactly as one by one (none of them sees another's decision).
 */
function settleParts(calls: SettleCall[]): SettleCall[][] {
  const parts: SettleCall[][] = [];
  let current: PerMessageCall[] = [];
  let indexes = new Set<number>();
  const close = () => {
    if (current.length > 0) parts.push(current);
    current = [];
    indexes = new Set();
  };
  for (const call of calls) {
    if (!isPerMessage(call) || !validIndex(call)) {
      close();
      parts.push([call]);
      continue;
    }
    if (indexes.has(call.index) || current.length >= COMBINED_SETTLE_MAX) close();
    current.push(call);
    indexes.add(call.index);
  }
  close();
  return parts;
}

export async function settle(
  t: DeliveryTable,
  batchId: string,
  credentialHash: string,
  call: SettleCall,
): Promise<SettleResult> {
  const perMessage = call.kind === 'ack' || call.kind === 'retry';
  if (perMessage && !(Number.isInteger(call.index) && call.index >= 0)) return 'unknown_batch';
  // One conditional write, no read first: the condition checks the credential, that the batch
  // is open, that the index is in it, and that nothing settled the message yet.
  const open = 'attribute_exists(#pk) AND credentialHash = :h AND closed = :false';
  const token = writeToken();
  const out = await updateItem(t, deliveryKeys.head(batchId), {
    UpdateExpression: `SET ${perMessage ? 'settled.#i' : '#all'} = :code, ${SETTLE_TOKEN} = :token`,
    ConditionExpression: perMessage
      ? `${open} AND #size > :index AND attribute_not_exists(settled.#i) AND attribute_not_exists(#all)`
      : `${open} AND attribute_not_exists(#all)`,
    ExpressionAttributeNames: perMessage
      ? { '#pk': PK, '#i': String(call.index), '#all': 'all', '#size': 'size' }
      : { '#pk': PK, '#all': 'all' },
    ExpressionAttributeValues: marshall({
      ':h': credentialHash,
      ':false': false,
      ':code': codeOf(call),
      ':token': token,
      ...(perMessage ? { ':index': call.index } : {}),
    }),
    ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
  });
  if (out.ok) return 'ok';
  const old = out.old;
  // This call's first try was written and its answer lost; the SDK's retry failed against it.
  if (old?.[SETTLE_TOKEN] === token) return 'ok';
  if (!old || old.credentialHash !== credentialHash || old.closed === true) return 'unknown_batch';
  if (perMessage && !(call.index < (old.size as number))) return 'unknown_batch';
  // Open and ours: a per-message call lost to an earlier settlement; a batch-level call after
  // another batch-level call has nothing left to settle.
  return perMessage ? 'already_settled' : 'ok';
}

/**
 * Settles a group in order. `settleOne` is the store's own single-call settlement, so a call
 * settled alone goes exactly where a single `settle` would.
 */
export async function settleMany(
  t: DeliveryTable,
  batchId: string,
  credentialHash: string,
  calls: SettleCall[],
  settleOne: (call: SettleCall) => Promise<SettleResult>,
): Promise<GroupSettleResult[]> {
  const results: GroupSettleResult[] = [];
  try {
    for (const part of settleParts(calls)) {
      const [only] = part;
      if (part.length === 1 && only) {
        results.push(await settleOne(only));
        continue;
      }
      const combined = await settleDistinct(t, batchId, credentialHash, part as PerMessageCall[]);
      if (combined === 'ok' || combined === 'unknown_batch') {
        for (const _ of part) results.push(combined);
        continue;
      }
      // Some message is settled already (or an index is out of range): each call gets its own
      // answer from the single-call write.
      for (const call of part) results.push(await settleOne(call));
    }
  } catch (err) {
    // This write's outcome is unknown; the rest of the group is not attempted.
    log.warn('a settlement write failed; the rest of its group was not attempted', {
      batchId,
      settled: results.length,
      calls: calls.length,
      err,
    });
  }
  while (results.length < calls.length) results.push('write_failed');
  return results;
}

/**
 * One conditional write settling per-message calls on distinct indexes: all or nothing, on
 * condition that the batch is open and ours, every index is in it and none is settled yet.
 * `unknown_batch` when the head shows the batch closed, gone or not ours (so is every call of
 * the part, one by one); `mixed` when the calls need answers of their own.
 */
async function settleDistinct(
  t: DeliveryTable,
  batchId: string,
  credentialHash: string,
  calls: PerMessageCall[],
): Promise<'ok' | 'unknown_batch' | 'mixed'> {
  const names: Record<string, string> = { '#pk': PK, '#all': 'all', '#size': 'size', '#s': 'settled' };
  const token = writeToken();
  const values: Record<string, unknown> = {
    ':h': credentialHash,
    ':false': false,
    ':max': Math.max(...calls.map((c) => c.index)),
    ':token': token,
  };
  const codes = new Map<string, string>();
  const sets: string[] = [];
  const unsettled: string[] = [];
  for (const [j, call] of calls.entries()) {
    const code = codeOf(call);
    let value = codes.get(code);
    if (!value) {
      value = `:c${codes.size}`;
      codes.set(code, value);
      values[value] = code;
    }
    names[`#i${j}`] = String(call.index);
    sets.push(`#s.#i${j} = ${value}`);
    unsettled.push(`attribute_not_exists(#s.#i${j})`);
  }
  const out = await updateItem(t, deliveryKeys.head(batchId), {
    UpdateExpression: `SET ${sets.join(', ')}, ${SETTLE_TOKEN} = :token`,
    ConditionExpression: `attribute_exists(#pk) AND credentialHash = :h AND closed = :false AND #size > :max AND attribute_not_exists(#all) AND ${unsettled.join(' AND ')}`,
    ExpressionAttributeNames: names,
    ExpressionAttributeValues: marshall(values),
    ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
  });
  if (out.ok) return 'ok';
  const old = out.old;
  // Written by this call's first try, whose answer was lost (as in `settle`).
  if (old?.[SETTLE_TOKEN] === token) return 'ok';
  // Closed is for good and the credential never changes: every call would be refused alike.
  if (!old || old.credentialHash !== credentialHash || old.closed === true) return 'unknown_batch';
  return 'mixed';
}
