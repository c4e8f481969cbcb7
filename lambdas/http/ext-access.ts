import { canRead, canWrite, type Principal } from '../engine/auth.ts';
import type { ResourceRecord } from '../engine/model.ts';
import { HostError } from './problem.ts';

/**
 * The Resource an `/ext/` call names, as the caller may see it: another principal's Resource, or
 * one in a Space the caller cannot read, is `404` (as the Host API answers for it); `write`
 * without a write grant on its Space is `403`.
 */
export async function callerResource(
  principal: Principal,
  uid: string,
  getResource: (uid: string) => Promise<ResourceRecord | undefined>,
  need: 'read' | 'write',
): Promise<ResourceRecord> {
  const resource = await getResource(uid);
  if (!resource || resource.principal !== principal.id || !canRead(principal, resource.space)) {
    throw new HostError('not_found');
  }
  if (need === 'write' && !canWrite(principal, resource.space)) {
    throw new HostError('forbidden', 'no write access to this Space');
  }
  return resource;
}
