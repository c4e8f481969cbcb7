import type { Manifest, ManifestEntry } from '../../delivery/delivery-store.ts';

/**
 * A batch's manifest as bytes (a DynamoDB Binary), because DynamoDB bills writes by item size and
 * the manifest is the largest item the Host writes per batch: SQS receipt handles are about 390
 * base64 characters each, so the JSON form cost ≈ 0.5 KB (0.5 WRU) per message. Handles and ids
 * that are base64 or UUIDs are stored as their bytes (291 and 16), numbers as varints: ≈ 0.33 KB
 * per message with SQS's handles.
 *
 * Layout (version 1): version byte, entry count, move count, then each entry: id, ts, attempts,
 * flags (hadRecord, receivedAt present, handles present), [receivedAt], [handle count, handles].
 * A string is a kind byte (0 UTF-8, 1 UUID, 2 base64) and its bytes; a number a kind byte
 * (0 unsigned varint, 1 float64) and its bytes.
 */
const VERSION = 1;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const HAD_RECORD = 1;
const HAS_RECEIVED_AT = 2;
const HAS_HANDLES = 4;

class Writer {
  private buf = Buffer.allocUnsafe(1024);
  private at = 0;

  private room(n: number): void {
    if (this.at + n <= this.buf.length) return;
    const next = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.at + n));
    this.buf.copy(next, 0, 0, this.at);
    this.buf = next;
  }

  byte(b: number): void {
    this.room(1);
    this.buf[this.at++] = b;
  }

  varint(n: number): void {
    let v = n;
    while (v >= 0x80) {
      this.byte((v % 0x80) | 0x80);
      v = Math.floor(v / 0x80);
    }
    this.byte(v);
  }

  bytes(b: Buffer): void {
    this.room(b.length);
    b.copy(this.buf, this.at);
    this.at += b.length;
  }

  number(n: number): void {
    if (Number.isSafeInteger(n) && n >= 0) {
      this.byte(0);
      this.varint(n);
      return;
    }
    this.byte(1);
    this.room(8);
    this.buf.writeDoubleLE(n, this.at);
    this.at += 8;
  }

  string(s: string): void {
    if (UUID.test(s)) {
      this.byte(1);
      this.bytes(Buffer.from(s.replaceAll('-', ''), 'hex'));
      return;
    }
    const decoded = s.length >= 4 ? Buffer.from(s, 'base64') : undefined;
    const asBase64 = decoded !== undefined && decoded.toString('base64') === s;
    const b = asBase64 ? decoded : Buffer.from(s, 'utf8');
    this.byte(asBase64 ? 2 : 0);
    this.varint(b.length);
    this.bytes(b);
  }

  done(): Uint8Array {
    return this.buf.subarray(0, this.at);
  }
}

class Reader {
  private at = 0;
  private readonly buf: Buffer;

  constructor(buf: Buffer) {
    this.buf = buf;
  }

  byte(): number {
    if (this.at >= this.buf.length) throw new Error('manifest bytes end early');
    return this.buf[this.at++] as number;
  }

  varint(): number {
    let n = 0;
    let scale = 1;
    for (;;) {
      const b = this.byte();
      n += (b & 0x7f) * scale;
      if (b < 0x80) return n;
      scale *= 0x80;
    }
  }

  bytes(n: number): Buffer {
    if (this.at + n > this.buf.length) throw new Error('manifest bytes end early');
    const out = this.buf.subarray(this.at, this.at + n);
    this.at += n;
    return out;
  }

  number(): number {
    const kind = this.byte();
    if (kind === 0) return this.varint();
    if (kind !== 1) throw new Error(`unknown number kind ${kind} in a manifest`);
    return this.bytes(8).readDoubleLE(0);
  }

  string(): string {
    const kind = this.byte();
    if (kind === 1) {
      const hex = this.bytes(16).toString('hex');
      return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
    }
    if (kind !== 0 && kind !== 2) throw new Error(`unknown string kind ${kind} in a manifest`);
    const b = this.bytes(this.varint());
    return kind === 2 ? b.toString('base64') : b.toString('utf8');
  }

  end(): void {
    if (this.at !== this.buf.length) throw new Error('manifest bytes go on past their end');
  }
}

function writeEntry(w: Writer, m: ManifestEntry): void {
  w.string(m.id);
  w.number(m.ts);
  w.varint(m.attempts);
  const flags =
    (m.hadRecord ? HAD_RECORD : 0) |
    (m.receivedAt !== undefined ? HAS_RECEIVED_AT : 0) |
    (m.handles !== undefined ? HAS_HANDLES : 0);
  w.byte(flags);
  if (m.receivedAt !== undefined) w.number(m.receivedAt);
  if (m.handles !== undefined) {
    w.varint(m.handles.length);
    for (const h of m.handles) w.string(h);
  }
}

function readEntry(r: Reader): ManifestEntry {
  const id = r.string();
  const ts = r.number();
  const attempts = r.varint();
  const flags = r.byte();
  const entry: ManifestEntry = { id, ts, attempts, hadRecord: (flags & HAD_RECORD) !== 0 };
  if (flags & HAS_RECEIVED_AT) entry.receivedAt = r.number();
  if (flags & HAS_HANDLES) {
    const n = r.varint();
    entry.handles = Array.from({ length: n }, () => r.string());
  }
  return entry;
}

export function encodeManifest(manifest: Manifest): Uint8Array {
  const w = new Writer();
  w.byte(VERSION);
  w.varint(manifest.entries.length);
  w.varint(manifest.moves.length);
  for (const m of manifest.entries) writeEntry(w, m);
  for (const m of manifest.moves) writeEntry(w, m);
  return w.done();
}

export function decodeManifest(bytes: Uint8Array): Manifest {
  const r = new Reader(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
  const version = r.byte();
  if (version !== VERSION) throw new Error(`manifest version ${version} is not known to this Host`);
  const entries = r.varint();
  const moves = r.varint();
  const manifest: Manifest = {
    entries: Array.from({ length: entries }, () => readEntry(r)),
    moves: Array.from({ length: moves }, () => readEntry(r)),
  };
  r.end();
  return manifest;
}
