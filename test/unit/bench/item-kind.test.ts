import { describe, expect, it } from 'vitest';
import { foldKinds, itemKind } from '../../../bench/support/meter.ts';

const key = (pk: string, sk?: string) => ({ pk: { S: pk }, ...(sk !== undefined ? { sk: { S: sk } } : {}) });

// The bench's per-batch breakdown groups DynamoDB items by kind; a kind must not split into one
// entry per item (latest.md once listed every RECENT# item of a run on its own).
describe('bench item kinds', () => {
  it('names a kind by the partition prefix and a word sort key', () => {
    expect(itemKind(key('ATTACH#r01', '_'))).toBe('ATTACH');
    expect(itemKind(key('RES#r01'))).toBe('RES');
    expect(itemKind(key('BATCH#b1', 'head'))).toBe('BATCH/head');
    expect(itemKind(key('BATCH#b1', 'manifest'))).toBe('BATCH/manifest');
    expect(itemKind(key('BATCH#b1', 'manifest#Qm9vZ3Vz'))).toBe('BATCH/manifest');
  });

  it('folds per-item sort keys (times, ids) into one kind', () => {
    expect(itemKind(key('RECENT#r01', '001796155425220'))).toBe('RECENT/*');
    expect(itemKind(key('RECENT#r01', '001796155425250'))).toBe('RECENT/*');
    expect(itemKind(key('ATT#q1', '7f3a9c0e'))).toBe('ATT/*');
  });
});

describe('bench kinds stored before folding', () => {
  it('fold when a run is re-rendered (--from)', () => {
    expect(
      foldKinds({ 'RECENT/001': 1, 'RECENT/002': 2, 'BATCH/head': 1, ATTACH: 1, 'query:DISPATCH': 1 }),
    ).toEqual({
      'RECENT/*': 3,
      'BATCH/head': 1,
      ATTACH: 1,
      'query:DISPATCH': 1,
    });
  });
});
