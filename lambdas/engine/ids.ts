import { randomBytes } from 'node:crypto';

const CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';

/** 10 characters of milliseconds then 16 of randomness (80 bits): sortable by creation time. */
function ulid(now: number): string {
  let time = '';
  let t = now;
  for (let i = 0; i < 10; i++) {
    time = CROCKFORD[t % 32] + time;
    t = Math.floor(t / 32);
  }
  const bytes = randomBytes(10);
  let rand = '';
  let acc = 0n;
  for (const b of bytes) acc = (acc << 8n) | BigInt(b);
  for (let i = 0; i < 16; i++) {
    rand = CROCKFORD[Number(acc & 31n)] + rand;
    acc >>= 5n;
  }
  return time + rand;
}

/** Resource uids: never reused, ordered by creation so lists read naturally. */
export const newResourceUid = (now = Date.now()) => `r${ulid(now)}`;
export const newOperationId = (now = Date.now()) => `op${ulid(now)}`;
/** Lease tokens and batch credentials: 128+ random bits, unguessable. */
export const newToken = (bytes = 24) => randomBytes(bytes).toString('base64url');

export const ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;
export const IDEMPOTENCY_KEY_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:-]{15,127}$/;
