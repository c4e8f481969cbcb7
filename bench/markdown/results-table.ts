/** The results table: every figure beside its baseline and target; also printed on the console. */
import { fmtSpread } from '../format.ts';
import type { Summary, Verdict } from '../summary-model.ts';

const VERDICT_TEXT: Record<Verdict, string> = { met: '**met**', missed: '**missed**', '—': '—' };

/** `plain` leaves the verdicts unbolded, for the console. */
export function resultsTable(summary: Summary, plain = false): string {
  const lines = [
    '| Group | Figure | Setting | Host | Baseline | Host ÷ baseline | Target | Met? |',
    '|---|---|---|---|---|---|---|---|',
  ];
  for (const r of summary.rows) {
    const unit = r.unit ? ` ${r.unit}` : '';
    const baseline = r.baseline ? `${fmtSpread(r.baseline, r.digits)}${unit} (${r.baselineLabel})` : '—';
    const verdict = plain ? r.verdict : VERDICT_TEXT[r.verdict];
    const host = `${fmtSpread(r.host, r.digits)}${unit}`;
    lines.push(
      `| ${r.group} | ${r.figure} | ${r.setting} | ${host} | ${baseline} | ${fmtSpread(r.ratio, 2)} | ${r.target ?? '—'} | ${verdict} |`,
    );
  }
  return lines.join('\n');
}
