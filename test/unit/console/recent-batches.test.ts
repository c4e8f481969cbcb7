/**
 * A finished batch as consumer state shows it, from its head alone: the digest registration
 * wrote and the settlements the close fixed (issue 14, Deliver 2; issue 13: no write of its own).
 */
import { describe, expect, it } from 'vitest';
import { digestOf } from '../../../lambdas/delivery/batch-digest.ts';
import type { BatchHead, Manifest } from '../../../lambdas/delivery/delivery-store.ts';
import { summarizeHead } from '../../../lambdas/operator/recent-batches.ts';

const entry = (id: string, attempts: number, receivedAt?: number) => ({
  id,
  ts: 0,
  attempts,
  hadRecord: false,
  receivedAt,
});
const closed = (manifest: Manifest, maxRetries: number, over: Partial<BatchHead>): BatchHead =>
  ({
    batchId: 'b1',
    consumerUid: 'c',
    size: manifest.entries.length,
    settled: {},
    outcome: 'returned',
    doubtful: false,
    closed: true,
    closedAt: 3000,
    closedBy: 'runner',
    digest: digestOf(manifest, maxRetries),
    ...over,
  }) as BatchHead;

describe('summarizeHead', () => {
  it('counts what finalisation applies: explicit settlements, then the implicit one of the outcome', () => {
    const manifest: Manifest = {
      entries: [entry('m1', 1, 1000), entry('m2', 2, 1100), entry('m3', 4, 1200)],
      moves: [],
    };
    const error = { name: 'TypeError', message: 'x is undefined' };
    expect(summarizeHead(closed(manifest, 3, { outcome: 'threw', settled: { '0': 'a' }, error }))).toEqual({
      batchId: 'b1',
      outcome: 'threw',
      finalizedBy: 'live',
      endedAt: 3000,
      durationMs: 2000,
      messages: 3,
      acknowledged: 1,
      retried: 1,
      exhausted: 1,
      attempts: { min: 1, max: 4 },
      error,
    });
    expect(summarizeHead(closed(manifest, 3, { settled: { '1': 'r30' } }))).toMatchObject({
      acknowledged: 2,
      retried: 1,
      exhausted: 0,
      error: null,
    });
    // A batch-level settlement covers the indexes not settled one by one.
    expect(
      summarizeHead(closed(manifest, 3, { outcome: 'threw', settled: { '2': 'a' }, all: 'a' })),
    ).toMatchObject({ acknowledged: 3, retried: 0, exhausted: 0 });
  });

  it('moves on receipt count as out of retries and as messages, not as delivered', () => {
    const manifest: Manifest = { entries: [entry('m1', 1, 50)], moves: [entry('m0', 2, 40)] };
    expect(summarizeHead(closed(manifest, 1, {}))).toMatchObject({
      messages: 2,
      acknowledged: 1,
      retried: 0,
      exhausted: 1,
      durationMs: 2960,
      attempts: { min: 1, max: 1 },
    });
  });

  it('a doubtful batch acknowledges nothing implicitly; the Host’s close or a recovery fence reads as recovery', () => {
    const manifest: Manifest = { entries: [entry('m1', 1)], moves: [] };
    expect(summarizeHead(closed(manifest, 3, { doubtful: true }))).toMatchObject({
      acknowledged: 0,
      retried: 1,
      durationMs: null,
    });
    const empty = { entries: [], moves: [] };
    expect(summarizeHead(closed(empty, 0, { outcome: undefined, closedBy: 'host' }))).toMatchObject({
      outcome: 'abandoned',
      finalizedBy: 'recovery',
      messages: 0,
      attempts: null,
    });
    expect(summarizeHead(closed(manifest, 3, { recovering: true }))).toMatchObject({
      finalizedBy: 'recovery',
    });
  });

  it('an open head, or one an older Host registered without a digest, is not listed', () => {
    const manifest: Manifest = { entries: [entry('m1', 1)], moves: [] };
    expect(summarizeHead(closed(manifest, 3, { closed: false, closedAt: undefined }))).toBeUndefined();
    expect(summarizeHead(closed(manifest, 3, { digest: undefined }))).toBeUndefined();
  });
});
