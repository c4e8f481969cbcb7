import { createHmac, timingSafeEqual } from 'node:crypto';

export interface CursorBinding {
  principal: string;
  space?: string;
  name?: string;
  form?: string;
}

/**
 * List cursors: `v1.<payload>.<mac>`, the MAC (HMAC-SHA256 under the Host's cursor key) covering
 * the payload, the principal and the filters, so a cursor cannot be forged, moved to another
 * principal or reused under other filters (HA-11).
 */
export class CursorCodec {
  private readonly key: Buffer;

  constructor(key: Buffer) {
    if (key.length < 32) throw new Error('the cursor key needs at least 32 bytes');
    this.key = key;
  }

  private mac(payload: string, b: CursorBinding): Buffer {
    return createHmac('sha256', this.key)
      .update(
        JSON.stringify([
          'forms.takoform.com/v2',
          b.principal,
          b.space ?? null,
          b.name ?? null,
          b.form ?? null,
          payload,
        ]),
      )
      .digest();
  }

  encode(afterUid: string, b: CursorBinding): string {
    const payload = Buffer.from(JSON.stringify({ after: afterUid }), 'utf8').toString('base64url');
    return `v1.${payload}.${this.mac(payload, b).toString('base64url')}`;
  }

  /** The uid to continue after, or undefined when the cursor is not valid for this binding. */
  decode(cursor: string, b: CursorBinding): string | undefined {
    const parts = cursor.split('.');
    if (parts.length !== 3 || parts[0] !== 'v1') return undefined;
    const [, payload, mac] = parts as [string, string, string];
    if (!/^[A-Za-z0-9_-]{1,2048}$/.test(payload) || !/^[A-Za-z0-9_-]{43}$/.test(mac)) return undefined;
    const expected = this.mac(payload, b);
    const given = Buffer.from(mac, 'base64url');
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return undefined;
    try {
      const { after } = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
      return typeof after === 'string' ? after : undefined;
    } catch {
      return undefined;
    }
  }
}
