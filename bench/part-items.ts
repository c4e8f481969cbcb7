/**
 * The items the parts of the Host named in DynamoDB requests, by kind (`ATTACH`, `BATCH/head`,
 * `DISPATCH`, …), from a cell's part breakdown: what the explanations say each batch read and wrote.
 */
import { type PartBreakdown, READ_OPS } from './per-batch.ts';
import { foldKinds, type SdkTally } from './support/meter.ts';

const DYNAMODB = 'DynamoDB:';

/** The DynamoDB requests of a part: reads or writes, each with its tally. */
function dynamoRequests(ops: Record<string, SdkTally>, reads: boolean): SdkTally[] {
  return Object.entries(ops).flatMap(([key, e]) =>
    key.startsWith(DYNAMODB) && READ_OPS.has(key.slice(DYNAMODB.length)) === reads ? [e] : [],
  );
}

/** Item kinds a part read or wrote, summed over its DynamoDB operations (not per batch). */
export function kindsOf(b: PartBreakdown, part: string, reads: boolean): Record<string, number> {
  const out: Record<string, number> = {};
  for (const e of dynamoRequests(b.ops[part] ?? {}, reads))
    for (const [kind, n] of Object.entries(foldKinds(e.items))) out[kind] = (out[kind] ?? 0) + n;
  return out;
}

/** Item kinds read by every part together (not per batch). */
export function kindsRead(b: PartBreakdown): Record<string, number> {
  const read: Record<string, number> = {};
  for (const part of Object.keys(b.ops))
    for (const [k, n] of Object.entries(kindsOf(b, part, true))) read[k] = (read[k] ?? 0) + n;
  return read;
}

/** Item kinds read in the batch's path that the same path also writes (reads a condition could replace). */
export function readAndWritten(b: PartBreakdown): { kinds: string[]; readsPerBatch: number } {
  const read = kindsRead(b);
  const written = new Set(Object.keys(b.ops).flatMap((part) => Object.keys(kindsOf(b, part, false))));
  const kinds = Object.keys(read)
    .filter((k) => written.has(k))
    .sort();
  const n = kinds.reduce((a, k) => a + (read[k] ?? 0), 0);
  return { kinds, readsPerBatch: n / Math.max(1, b.batches) };
}

/** A batch head's write units: it stays under 1 KB (ids, digest, outcome; never the messages). */
const HEAD_WRU = 1;

/**
 * WRU per batch of the batch manifest's own PutItem. Counted by item where the meter did so
 * (`wruByItem`); in results recorded before it, from the PutItems that named manifests only, or —
 * once heads were PutItems too — from those that named heads and manifests, less a head's unit
 * for each head.
 */
export function manifestWruPerBatch(b: PartBreakdown): number {
  let units = 0;
  for (const ops of Object.values(b.ops))
    for (const e of dynamoRequests(ops, false)) {
      const byItem = e.wruByItem?.['BATCH/manifest'];
      if (byItem !== undefined) {
        units += byItem;
        continue;
      }
      const kinds = foldKinds(e.items ?? {});
      const names = Object.keys(kinds).sort().join(',');
      if (names === 'BATCH/manifest') units += e.wru;
      else if (names === 'BATCH/head,BATCH/manifest' && e.wruByItem === undefined)
        units += Math.max(0, e.wru - HEAD_WRU * (kinds['BATCH/head'] ?? 0));
    }
  return units / Math.max(1, b.batches);
}

/** WRU a DynamoDB write request cost on average, writes refused by a condition included. */
export function wruPerWriteRequest(b: PartBreakdown): number {
  let calls = 0;
  let units = 0;
  for (const ops of Object.values(b.ops))
    for (const e of dynamoRequests(ops, false)) {
      calls += e.calls;
      units += e.wru + e.refusedWrites;
    }
  return units / Math.max(1, calls);
}
