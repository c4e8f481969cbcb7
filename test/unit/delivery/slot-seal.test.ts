/**
 * Issue 13 / DL-09: the seal that lets the Host trust a slot without reading its records again.
 * Any change to any field, another key, or a missing seal fails; the JSON hop a slot makes
 * through the state machine and the batch host (absent optional fields dropped) does not.
 */
import { createHmac, randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { Manifest, ManifestEntry } from '../../../lambdas/delivery/delivery-store.ts';
import {
  manifestSeal,
  manifestSealValid,
  sealSlot,
  slotSealValid,
} from '../../../lambdas/delivery/slot-seal.ts';
import { canonicalJson } from '../../../lambdas/engine/canonical-json.ts';

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

describe('manifest seals (DL-09)', () => {
  const manifest: Manifest = {
    entries: [
      {
        id: 'm1',
        ts: 1_796_155_425_220,
        attempts: 2,
        hadRecord: true,
        handles: ['h1', 'h1b'],
        receivedAt: 1_796_155_425_900,
      },
      { id: 'm2', ts: 1_796_155_425_221, attempts: 1, hadRecord: false, handles: ['h2'] },
    ],
    moves: [
      { id: 'm0', ts: 1_796_155_425_000, attempts: 4, hadRecord: true, handles: ['h0'], receivedAt: 5 },
    ],
  };
  const seal = manifestSeal(key, 'b1', manifest);

  it('verifies the runner’s copy after a JSON hop, whatever the order of its keys', () => {
    const reordered = JSON.parse(
      JSON.stringify({
        moves: manifest.moves,
        entries: manifest.entries.map(({ handles, receivedAt, ...rest }) => ({
          receivedAt,
          handles,
          ...rest,
        })),
      }),
    );
    expect(manifestSealValid(key, 'b1', reordered, seal)).toBe(true);
  });

  it('refuses a copy with any one field of any entry or move changed, or another batch’s seal', () => {
    const entry = (m: Manifest, i: number) => m.entries[i] as ManifestEntry;
    const changes: ((m: Manifest) => void)[] = [
      (m) => {
        entry(m, 0).id = 'mX';
      },
      (m) => {
        entry(m, 0).ts += 1;
      },
      (m) => {
        entry(m, 1).attempts = 2;
      },
      (m) => {
        entry(m, 1).hadRecord = true;
      },
      (m) => {
        entry(m, 0).handles?.pop();
      },
      (m) => {
        entry(m, 1).handles = undefined;
      },
      (m) => {
        entry(m, 1).receivedAt = 7;
      },
      (m) => {
        (m.moves[0] as ManifestEntry).attempts = 3;
      },
      (m) => {
        m.moves.pop();
      },
      (m) => {
        m.entries.reverse();
      },
    ];
    for (const change of changes) {
      const copy = structuredClone(manifest);
      change(copy);
      expect(manifestSealValid(key, 'b1', copy, seal)).toBe(false);
    }
    expect(manifestSealValid(key, 'b2', manifest, seal)).toBe(false);
    expect(manifestSealValid(randomBytes(32), 'b1', manifest, seal)).toBe(false);
  });

  it('still verifies a seal made by a Host before the fixed-order seal (canonical JSON)', () => {
    const older = createHmac('sha256', key)
      .update(`takoform/manifest/v1\nb1\n${canonicalJson(JSON.parse(JSON.stringify(manifest)))}`)
      .digest('base64url');
    expect(older).not.toBe(seal);
    expect(manifestSealValid(key, 'b1', manifest, older)).toBe(true);
  });
});
