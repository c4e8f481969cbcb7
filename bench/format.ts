/** Number formatting shared by the report, the chart and the cost region of docs/costs.md. */
import type { Spread } from './support/stats.ts';

export function fmt(v: number, digits: number): string {
  if (!Number.isFinite(v)) return 'n/a';
  return v.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

export function fmtSpread(s: Spread | undefined, digits: number): string {
  if (!s || s.runs === 0) return 'n/a';
  if (s.runs === 1 || s.min === s.max) return fmt(s.median, digits);
  return `${fmt(s.median, digits)} [${fmt(s.min, digits)}–${fmt(s.max, digits)}]`;
}
