/**
 * Seals: what the Host learned when it took a slot (consumer settings, queue target, worker)
 * travels with the slot through the state machine and the runner, bound by an HMAC with the
 * Host's delivery key. A sealed slot is trusted without reading those records again; a slot whose
 * seal does not verify is refused as `unknown_batch`, so a runner can neither forge nor alter one
 * (DL-09). A batch's manifest travels the same way from registration to finalisation, so the
 * runner's copy stands in for reading it back from the table.
 *
 * Every MAC here starts with its own label, so none can stand in for another, nor for a batch
 * credential (the HMAC of a bare batch id, which never starts with `takoform/`).
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { canonicalJson } from '../engine/canonical-json.ts';
import type { Manifest, ManifestEntry } from './delivery-store.ts';

const SLOT_LABEL = 'takoform/slot/v1\n';

/** Over the value as it arrives after a JSON hop (absent optional fields dropped). */
const mac = (key: Buffer, label: string, value: unknown) =>
  createHmac('sha256', key)
    .update(label + canonicalJson(JSON.parse(JSON.stringify(value))))
    .digest('base64url');

/** Compares two MACs in constant time. */
export function sameMac(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** `fields` with a `seal` over all of them under `label`. */
const sealed = <T extends object>(key: Buffer, label: string, fields: T): T & { seal: string } => ({
  ...fields,
  seal: mac(key, label, fields),
});

/** Whether `value.seal` is the seal under `label` of the value's other fields. */
function sealValid(key: Buffer, label: string, value: { seal?: unknown }): boolean {
  const { seal, ...fields } = value;
  return typeof seal === 'string' && sameMac(seal, mac(key, label, fields));
}

/** The slot with its seal over every other field. */
export const sealSlot = <T extends object>(key: Buffer, fields: T) => sealed(key, SLOT_LABEL, fields);

/** Whether `slot.seal` is the Host's seal of the slot's other fields. */
export const slotSealValid = (key: Buffer, slot: { seal?: string }) => sealValid(key, SLOT_LABEL, slot);

const LANE_LABEL = 'takoform/lane/v1\n';

/** A lane context with its seal: what a lane the Host starts may take over from the lane that started it. */
export const sealLane = <T extends object>(key: Buffer, fields: T) => sealed(key, LANE_LABEL, fields);

/** Whether `lane.seal` is the Host's seal of the lane context's other fields. */
export const laneSealValid = (key: Buffer, lane: { seal?: unknown }) => sealValid(key, LANE_LABEL, lane);

const MANIFEST_LABEL_V1 = 'takoform/manifest/v1\n';
const MANIFEST_LABEL = 'takoform/manifest/v2\n';

/**
 * Every field of a manifest in a fixed order. Canonical JSON of a batch of 100 (each with a
 * 390-character receipt handle) took ≈ 0.8 ms to seal and as much to verify, per batch; this
 * takes a tenth of it. The Record type makes a new field of ManifestEntry a compile error here
 * until the seal covers it.
 */
function manifestText(manifest: Manifest): string {
  const row = (e: ManifestEntry) => {
    const fields: Record<keyof ManifestEntry, unknown> = {
      id: e.id,
      ts: e.ts,
      attempts: e.attempts,
      hadRecord: e.hadRecord,
      handles: e.handles ?? null,
      receivedAt: e.receivedAt ?? null,
    };
    return Object.values(fields);
  };
  return JSON.stringify([manifest.entries.map(row), manifest.moves.map(row)]);
}

/** The seal of a batch's manifest, as registration recorded it (ids, attempts, receipt handles). */
export function manifestSeal(key: Buffer, batchId: string, manifest: Manifest): string {
  return createHmac('sha256', key)
    .update(`${MANIFEST_LABEL}${batchId}\n`)
    .update(manifestText(manifest))
    .digest('base64url');
}

/**
 * Whether `seal` is the Host's seal of `manifest` for this batch — also one a Host before the
 * fixed-order seal made (a runner that registered before an upgrade finalises after it).
 */
export function manifestSealValid(key: Buffer, batchId: string, manifest: Manifest, seal: string): boolean {
  return (
    sameMac(seal, manifestSeal(key, batchId, manifest)) ||
    sameMac(seal, mac(key, `${MANIFEST_LABEL_V1}${batchId}\n`, manifest))
  );
}
