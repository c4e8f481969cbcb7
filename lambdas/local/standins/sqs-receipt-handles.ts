import { createHash } from 'node:crypto';

/**
 * fauxqs hands out a UUID (36 characters) as a receipt handle; SQS's are opaque base64 strings
 * of about 390 characters ("AQEB…", 291 bytes decoded). Every record the Host keeps of a batch
 * holds its receipt handles, so a stand-in with short ones would understate the Host's write
 * sizes (and its DynamoDB cost) roughly tenfold. The stand-in therefore shows the world handles
 * of SQS's length and gives fauxqs back its own: the long handle is `AQEB` + base64 of the UUID's
 * 16 bytes and 275 bytes derived from them, so it maps back without any table and a handle that
 * is not one of these (garbage, or another server's) reaches fauxqs unchanged.
 */
export const AWS_RECEIPT_HANDLE_LENGTH = 392;

const PREFIX = 'AQEB';
const PAD_BYTES = 275;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** One hash, repeated: the stand-in is on every call's path, and the bytes need only be checkable. */
function padOf(id: Buffer): Buffer {
  const block = createHash('sha256').update(id).digest();
  const pad = Buffer.allocUnsafe(PAD_BYTES);
  for (let at = 0; at < PAD_BYTES; at += block.length)
    block.copy(pad, at, 0, Math.min(block.length, PAD_BYTES - at));
  return pad;
}

/** The SQS-length handle shown for one of fauxqs's UUID handles (anything else is left alone). */
export function lengthen(handle: string): string {
  if (!UUID.test(handle)) return handle;
  const id = Buffer.from(handle.replaceAll('-', ''), 'hex');
  return PREFIX + Buffer.concat([id, padOf(id)]).toString('base64');
}

/** fauxqs's own handle behind a handle `lengthen` made; any other string unchanged. */
export function shorten(handle: string): string {
  if (handle.length !== AWS_RECEIPT_HANDLE_LENGTH || !handle.startsWith(PREFIX)) return handle;
  const bytes = Buffer.from(handle.slice(PREFIX.length), 'base64');
  if (bytes.length !== 16 + PAD_BYTES) return handle;
  const id = bytes.subarray(0, 16);
  if (!bytes.subarray(16).equals(padOf(id))) return handle;
  const hex = id.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

type Body = { ReceiptHandle?: unknown; Entries?: unknown } | undefined;

/** Rewrites, in place, the receipt handles an SQS JSON request names back to fauxqs's. */
export function shortenRequest(body: Body): void {
  if (!body || typeof body !== 'object') return;
  if (typeof body.ReceiptHandle === 'string') body.ReceiptHandle = shorten(body.ReceiptHandle);
  if (!Array.isArray(body.Entries)) return;
  for (const entry of body.Entries as { ReceiptHandle?: unknown }[]) {
    if (entry && typeof entry.ReceiptHandle === 'string') entry.ReceiptHandle = shorten(entry.ReceiptHandle);
  }
}

const RECEIPT_HANDLE_FIELD =
  /(?<!\\)"ReceiptHandle":"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})"/g;

/**
 * A ReceiveMessage response's JSON with every receipt handle lengthened. A text replace, not a
 * parse: responses carry up to ten bodies of 256 KB. The key with an unescaped quote before it
 * is a key of the response (inside a string every quote is escaped).
 */
export function lengthenReceiveResponse(payload: string): string {
  return payload.replace(
    RECEIPT_HANDLE_FIELD,
    (_, handle: string) => `"ReceiptHandle":"${lengthen(handle)}"`,
  );
}
