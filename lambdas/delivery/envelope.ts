/**
 * The SQS message body this Host writes: the Host message id, acceptance time, body bytes and,
 * for delays past SQS's 900 s, the time before which the message must not be delivered. Bodies
 * are base64 so any bytes survive SQS's character rules (DL-10).
 */
export interface Envelope {
  /** Host message id, 1..256 characters, kept on every redelivery. */
  id: string;
  /** Acceptance time, UTC epoch milliseconds. */
  ts: number;
  /** The message bytes. */
  body: Uint8Array;
  /** Not deliverable before this epoch-millisecond instant. */
  notBefore?: number;
  /** Set when the message belongs to a multi-message send that must commit first. */
  commit?: string;
  /**
   * Its producer wakes no lane (the producer client without `wake`): like a message sent straight
   * to SQS, it is found by a lane already watching the queue or by the supervisor's round
   * (`idleWaitFor`).
   */
  unannounced?: true;
}

interface Wire {
  v: 1;
  id: string;
  ts: number;
  b: string;
  nb?: number;
  c?: string;
  u?: 1;
}

export function encodeEnvelope(e: Envelope): string {
  const wire: Wire = {
    v: 1,
    id: e.id,
    ts: e.ts,
    b: Buffer.from(e.body.buffer, e.body.byteOffset, e.body.byteLength).toString('base64'),
  };
  if (e.notBefore !== undefined) wire.nb = e.notBefore;
  if (e.commit !== undefined) wire.c = e.commit;
  if (e.unannounced) wire.u = 1;
  return JSON.stringify(wire);
}

/** Undefined for bodies this Host did not write: they are never delivered as if they were. */
export function decodeEnvelope(text: string | undefined): Envelope | undefined {
  if (!text) return undefined;
  let wire: Partial<Wire>;
  try {
    wire = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (
    wire?.v !== 1 ||
    typeof wire.id !== 'string' ||
    typeof wire.ts !== 'number' ||
    typeof wire.b !== 'string'
  ) {
    return undefined;
  }
  const e: Envelope = { id: wire.id, ts: wire.ts, body: new Uint8Array(Buffer.from(wire.b, 'base64')) };
  if (typeof wire.nb === 'number') e.notBefore = wire.nb;
  if (typeof wire.c === 'string') e.commit = wire.c;
  if (wire.u === 1) e.unannounced = true;
  return e;
}
