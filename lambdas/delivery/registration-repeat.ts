/**
 * A registration repeated because its answer was lost: the runner (or the Lambda client under it)
 * sends `register` again with the same slot and the same received messages after the first call
 * registered the batch. The repeat is answered as the first was — the same credential, deliver
 * list, deadline and manifest — so the handler runs the batch the Host recorded, and no attempt
 * is counted for a handler that never ran. Anything else that finds the head (another runner of
 * the slot, holding other receipt handles) is refused as before.
 */
import { type DeliveryContext, hashCredential } from './delivery-context.ts';
import type { BatchHead, Manifest, ManifestEntry } from './delivery-store.ts';
import type { Received, Registration } from './registration.ts';
import { manifestSeal } from './slot-seal.ts';
import type { Slot } from './slots.ts';

/**
 * The first call's answer, if the batch of `slot` is open, within its deadline, and recorded
 * from exactly these received messages; `slot refused` if it is, but its slot refused the mark
 * (the head is taken back then); else undefined. `hold` extends the visibility of what the
 * batch owns to the head's `invisibleUntil` again: the first call may have ended (its function
 * cut off) between its writes and its own hold.
 */
export async function repeatedRegistration(
  c: DeliveryContext,
  slot: Slot,
  received: readonly Received[],
  hold: (head: BatchHead, owned: ManifestEntry[]) => Promise<unknown>,
): Promise<Registration | 'slot refused' | undefined> {
  const head = await c.o.store.getHead(slot.batchId);
  const credential = c.credentialOf(slot.batchId);
  const open =
    head !== undefined &&
    !head.closed &&
    head.deadline > c.now() &&
    head.consumerUid === slot.consumerUid &&
    head.generation === slot.generation &&
    head.credentialHash === hashCredential(credential);
  if (!open) return undefined;
  const manifest = await c.o.store.getManifest(head);
  const deliver = manifest ? deliverOf(manifest, received) : undefined;
  if (!manifest || !deliver) return undefined;
  // The first call may have ended between the head and the slot's mark: a handler runs only in a
  // slot that holds its batch (DL-02).
  if (!(await c.o.store.markBatchSlot(head))) return 'slot refused';
  await hold(head, [...manifest.entries, ...manifest.moves]);
  return {
    credential,
    deadline: head.deadline,
    deliver,
    moves: manifest.moves.length,
    manifest: { ...manifest, seal: manifestSeal(c.o.credentialKey, slot.batchId, manifest) },
  };
}

/**
 * The manifest's deliveries as indexes into `received`, if every copy it holds was received in
 * this call. SQS gives a new receipt handle on every receive, so only a repeat of the call that
 * recorded them holds them all.
 */
function deliverOf(manifest: Manifest, received: readonly Received[]): Registration['deliver'] | undefined {
  const at = new Map(received.map((r, i) => [r.receiptHandle, i]));
  const owned = [...manifest.entries, ...manifest.moves];
  const ours = owned.every(
    (m) => m.handles !== undefined && m.handles.length > 0 && m.handles.every((h) => at.has(h)),
  );
  if (owned.length === 0 || !ours) return undefined;
  // A message's first copy decided for it (`classifyReceived`), and its handle comes first.
  return manifest.entries.map((m) => ({
    received: at.get(m.handles?.[0] ?? '') as number,
    attempts: m.attempts,
  }));
}
