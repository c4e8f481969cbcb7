import { describe, expect, it } from 'vitest';
import { judge, targetCount } from '../../../bench/summary/targets.ts';
import type { Row } from '../../../bench/summary-model.ts';

const row = (verdict: Row['verdict'], target?: string): Row => ({
  group: 'g',
  figure: 'f',
  setting: 's',
  unit: '',
  host: { median: 1, min: 1, max: 1, runs: 1 },
  verdict,
  digits: 0,
  ...(target ? { target } : {}),
});

describe('bench targets', () => {
  it('judges a measured figure, and leaves an unmeasured one unjudged', () => {
    expect(judge(5, (v) => v <= 6)).toBe('met');
    expect(judge(7, (v) => v <= 6)).toBe('missed');
    expect(judge(Number.NaN, (v) => v <= 6)).toBe('—');
  });

  it('counts only the rows that have a target and a verdict', () => {
    const rows = [row('met', '≤ 6'), row('missed', '≤ 6'), row('—', '≤ 6'), row('—'), row('met')];
    expect(targetCount({ rows })).toEqual({ met: 1, judged: 2 });
  });
});
