import { randomBytes, randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { decodeManifest, encodeManifest } from '../../../lambdas/adapters/aws/manifest-codec.ts';
import type { Manifest, ManifestEntry } from '../../../lambdas/delivery/delivery-store.ts';

/** An SQS receipt handle's shape: `AQEB` + base64 of 288 more bytes (≈ 390 characters). */
const sqsHandle = () => `AQEB${randomBytes(288).toString('base64')}`;

const entry = (over: Partial<ManifestEntry> = {}): ManifestEntry => ({
  id: randomUUID(),
  ts: 1_796_155_425_220,
  attempts: 1,
  hadRecord: false,
  handles: [sqsHandle()],
  receivedAt: 1_796_155_425_912,
  ...over,
});

// Issue 13: the manifest is the largest item a batch writes (DynamoDB bills by size); the bytes
// must give back exactly what registration recorded, whatever the strings and numbers are.
describe('manifest bytes', () => {
  it('give back every field of every entry and move exactly', () => {
    const manifest: Manifest = {
      entries: [
        entry(),
        entry({ attempts: 4, hadRecord: true, handles: [sqsHandle(), sqsHandle()] }),
        // Ids and handles of other shapes (another SQS-compatible server, an older Host).
        entry({ id: 'msg-ü-1', handles: ['a-handle+not=base64', ''], receivedAt: undefined }),
        entry({ id: 'abcd', handles: undefined }),
        entry({ ts: 1.5, receivedAt: -3, attempts: 0 }),
        entry({ handles: [] }),
      ],
      moves: [entry({ attempts: 3, hadRecord: true })],
    };
    const back = decodeManifest(encodeManifest(manifest));
    expect(back).toStrictEqual(JSON.parse(JSON.stringify(manifest)));
    expect(back.entries[3]).not.toHaveProperty('handles');
    expect(back.entries[2]).not.toHaveProperty('receivedAt');
  });

  it('an empty manifest round-trips', () => {
    expect(decodeManifest(encodeManifest({ entries: [], moves: [] }))).toStrictEqual({
      entries: [],
      moves: [],
    });
  });

  it('cost about a third of a KB per message with SQS-length handles (the JSON form: about half)', () => {
    const manifest: Manifest = { entries: Array.from({ length: 100 }, () => entry()), moves: [] };
    const bytes = encodeManifest(manifest).length;
    const json = Buffer.byteLength(JSON.stringify(manifest));
    expect(bytes / 100).toBeLessThan(330);
    expect(json / 100).toBeGreaterThan(480);
  });

  it('refuse bytes of an unknown version and bytes cut short', () => {
    const bytes = Buffer.from(encodeManifest({ entries: [entry()], moves: [] }));
    expect(() => decodeManifest(Buffer.concat([Buffer.from([9]), bytes.subarray(1)]))).toThrow(/version 9/);
    expect(() => decodeManifest(bytes.subarray(0, bytes.length - 5))).toThrow(/end early/);
    expect(() => decodeManifest(Buffer.concat([bytes, Buffer.from([0])]))).toThrow(/past their end/);
  });
});
