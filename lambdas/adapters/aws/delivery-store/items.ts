/** The delivery records' item keys, and the codecs of batch heads and manifests. */
import type { BatchDigest, BatchHead, Manifest } from '../../../delivery/delivery-store.ts';
import type { HandlerError } from '../../../delivery/settlement-protocol.ts';
import { TABLE_KEYS } from '../../../shared/table-schema.ts';
import { decodeManifest } from '../manifest-codec.ts';
import { DEFAULT_SLOT_LAYOUT, slotShardKey } from '../slot-groups.ts';

const { pk: PK, sk: SK } = TABLE_KEYS;

export const deliveryKeys = {
  /** A consumer's first slot shard (`dynamodb-slot-map.ts`). */
  slots: (consumerUid: string) => slotShardKey(consumerUid, 0, DEFAULT_SLOT_LAYOUT),
  head: (batchId: string) => ({ [PK]: `BATCH#${batchId}`, [SK]: 'head' }),
  /** Named by its content (`ref`), so a replayed registration never overwrites the manifest of a head. */
  manifest: (batchId: string, ref?: string) => ({
    [PK]: `BATCH#${batchId}`,
    [SK]: ref === undefined ? 'manifest' : `manifest#${ref}`,
  }),
  attempts: (queueUid: string, id: string) => ({ [PK]: `ATT#${queueUid}#${id}`, [SK]: '_' }),
  queueState: (queueUid: string) => ({ [PK]: `QSTATE#${queueUid}`, [SK]: '_' }),
};

/** Batch records outlive their batch by a week: long enough to audit, short enough to cost nothing. */
export const BATCH_RETENTION_SECONDS = 7 * 86_400;

export function toHead(item: Record<string, unknown>): BatchHead {
  return {
    batchId: item.batchId as string,
    consumerUid: item.consumerUid as string,
    queueUid: item.queueUid as string,
    generation: item.generation as number,
    credentialHash: item.credentialHash as string,
    size: item.size as number,
    closed: item.closed === true,
    outcome: item.outcome as string | undefined,
    applied: item.applied === true,
    settled: (item.settled ?? {}) as BatchHead['settled'],
    all: item.all as BatchHead['all'],
    deadline: item.deadline as number,
    // Heads of older Host versions have none: their handles were never recorded either.
    invisibleUntil: (item.invisibleUntil ?? item.deadline) as number,
    doubtful: item.doubtful === true,
    pendingDeadLetter: (item.pendingDeadLetter ?? []) as string[],
    ...(item.recovering === true ? { recovering: true } : {}),
    ...(item.digest ? { digest: item.digest as BatchDigest } : {}),
    ...(typeof item.manifestRef === 'string' ? { manifestRef: item.manifestRef } : {}),
    ...(typeof item.closedAt === 'number' ? { closedAt: item.closedAt } : {}),
    ...(item.closedBy === 'runner' || item.closedBy === 'host' ? { closedBy: item.closedBy } : {}),
    ...(item.error ? { error: item.error as HandlerError } : {}),
  };
}

/** A manifest item as stored by this Host (bytes) or by older versions (JSON; before that, a list). */
export function manifestOfItem(item: Record<string, unknown>): Manifest {
  if (item.entries instanceof Uint8Array) return decodeManifest(item.entries);
  const parsed = JSON.parse(item.entriesJson as string);
  return Array.isArray(parsed) ? { entries: parsed, moves: [] } : (parsed as Manifest);
}
