/**
 * Issue 13 / DL-09: the seal that lets the Host trust a slot without reading its records again.
 * Any change to any field, another key, or a missing seal fails; the JSON hop a slot makes
 * through the state machine and the batch host (absent optional fields dropped) does not.
 */
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { sealSlot, slotSealValid } from '../../../lambdas/delivery/slot-seal.ts';

const key = randomBytes(32);
const fields = {
  batchId: 'b0123456789abcdefgh.k2',
  consumerUid: 'r01CONSUMER',
  generation: 3,
  queueUid: 'r01QUEUE',
  queueName: 'orders',
  sqsUrl: 'http://127.0.0.1:9324/000000000000/takoform-r01QUEUE',
  maxBatchSize: 10,
  maxBatchTimeoutSeconds: 2,
  deadline: 1_764_000_000_000,
  invisibleUntil: 1_764_000_060_000,
  workerUid: 'r01WORKER',
  workerSpace: 'default',
  workerName: 'echo',
  workerFunction: 'local',
  wakeSeq: 7,
  maxConcurrency: 5,
  maxRetries: 3,
  retryDelaySeconds: 0,
  handlerMs: 900_000,
};

describe('slot seals', () => {
  it('DL-09 a sealed slot verifies, also after a JSON round trip', () => {
    const slot = sealSlot(key, fields);
    expect(slotSealValid(key, slot)).toBe(true);
    expect(slotSealValid(key, JSON.parse(JSON.stringify(slot)))).toBe(true);
    // An optional field left undefined is sealed as absent, as it arrives after the hop.
    const bare = sealSlot(key, { ...fields, wakeSeq: undefined });
    expect(slotSealValid(key, JSON.parse(JSON.stringify(bare)))).toBe(true);
  });

  it('DL-09 changing any field, adding one, another key or no seal fails', () => {
    const slot = sealSlot(key, fields);
    for (const [name, value] of Object.entries(fields)) {
      const changed = typeof value === 'number' ? value + 1 : `${value}x`;
      expect(slotSealValid(key, { ...slot, [name]: changed }), name).toBe(false);
    }
    expect(slotSealValid(key, { ...slot, extra: 1 } as typeof slot)).toBe(false);
    expect(slotSealValid(randomBytes(32), slot)).toBe(false);
    expect(slotSealValid(key, { ...slot, seal: undefined })).toBe(false);
    const last = slot.seal.at(-1) === 'A' ? 'B' : 'A';
    expect(slotSealValid(key, { ...slot, seal: `${slot.seal.slice(0, -1)}${last}` })).toBe(false);
  });
});
