import { createHash, timingSafeEqual } from 'node:crypto';
import { z } from 'zod';
import { ID_PATTERN } from './ids.ts';

export type Access = 'read' | 'write';

/** The stable identity behind one or more API keys; idempotency keys are scoped to it. */
export interface Principal {
  readonly id: string;
  readonly spaces: ReadonlyMap<string, Access>;
}

export const canRead = (p: Principal, space: string) => p.spaces.has(space);
export const canWrite = (p: Principal, space: string) => p.spaces.get(space) === 'write';

/** API keys are stored and looked up only as their SHA-256 (SEC-01). */
export const hashApiKey = (token: string) => createHash('sha256').update(token, 'utf8').digest('hex');

export interface Authenticator {
  /** The principal behind a bearer token, or undefined. Never logs or returns the token. */
  authenticate(token: string): Promise<Principal | undefined>;
}

export interface KeyRecord {
  keyHash: string;
  principal: string;
  spaces: Record<string, Access>;
}

/** Compares the stored hash in constant time, so even a lookup hit leaks no timing. */
export function matchKey(token: string, record: KeyRecord | undefined): Principal | undefined {
  const presented = Buffer.from(hashApiKey(token), 'hex');
  const stored = Buffer.from(record?.keyHash ?? '0'.repeat(64), 'hex');
  if (!record || stored.length !== presented.length || !timingSafeEqual(stored, presented)) return undefined;
  return { id: record.principal, spaces: new Map(Object.entries(record.spaces)) };
}

const spaceGrants = z.record(z.string().regex(ID_PATTERN), z.enum(['read', 'write']));

/** The local principals file (host-profile §2). */
export const principalsFileSchema = z.strictObject({
  principals: z
    .array(
      z.strictObject({
        id: z.string().regex(ID_PATTERN, 'principal ids follow the identifier grammar'),
        keys: z.array(z.string().min(32, 'API keys have at least 32 characters').max(512)).min(1),
        spaces: spaceGrants,
      }),
    )
    .min(1),
});

/** Keys held in memory as hashes: the local principals file or the generated development key. */
export class StaticKeyAuthenticator implements Authenticator {
  private readonly byHash = new Map<string, KeyRecord>();

  constructor(records: KeyRecord[]) {
    for (const r of records) this.byHash.set(r.keyHash, r);
  }

  static fromPrincipalsFile(value: unknown): StaticKeyAuthenticator {
    const parsed = principalsFileSchema.parse(value);
    const ids = new Set<string>();
    const records: KeyRecord[] = [];
    for (const p of parsed.principals) {
      if (ids.has(p.id)) throw new Error(`principal ${p.id} appears twice`);
      ids.add(p.id);
      for (const key of p.keys) records.push({ keyHash: hashApiKey(key), principal: p.id, spaces: p.spaces });
    }
    return new StaticKeyAuthenticator(records);
  }

  async authenticate(token: string): Promise<Principal | undefined> {
    return matchKey(token, this.byHash.get(hashApiKey(token)));
  }
}
