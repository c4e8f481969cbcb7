/** A missed handler utilisation: how long a slot was held outside its handler, and what that allows. */
import { byKey, cpuSentence } from '../explain.ts';
import { fmt, fmtSpread } from '../format.ts';
import type { Row, Summary } from '../summary-model.ts';

export function utilisationMiss(s: Summary, r: Row): string {
  const d = s.utilisationDetail;
  const slots = byKey(s, 'utilisation:slots');
  const out = [
    `**Running handlers: ${fmtSpread(r.host, 2)} of maxConcurrency against ≥ 0.9 — missed** (slots held: ${fmtSpread(slots?.host, 2)}).`,
  ];
  if (d) {
    const h = d.meanHandlerMs.median;
    const held = d.meanSlotMs.median;
    out.push(
      `A slot was held ${fmt(held, 0)} ms per batch, of which the handler ran ${fmt(h, 0)} ms` +
        ` (peak ${d.peakHandlers} handlers of ${d.maxConcurrency}, so the bound held). ` +
        `Handlers fill slots held × handler ÷ held = ${fmt((slots?.host.median ?? 1) * (h / Math.max(1, held)), 2)} of maxConcurrency.`,
      `What would close it: with every slot held, ≥ 0.9 needs ≤ ${fmt(h / 9, 1)} ms per batch outside the handler (now ${fmt(held - h, 0)} ms).` +
        ' The next batch is already received while the handler runs; registering it too would need a second slot per lane,' +
        ' which the bound forbids when every slot is held,' +
        " so the time left outside the handler is the Host's registration and finalisation.",
    );
    if (d.cpu) {
      const perSecond = (d.maxConcurrency * 0.9 * 1000) / Math.max(1, h);
      out.push(
        cpuSentence(d.cpu),
        `At ≥ 0.9 the handlers would start ${fmt(perSecond, 0)} batches a second,` +
          ` which at this CPU per batch needs ${fmt((perSecond * d.cpu.all.median) / 1000, 2)} cores busy (now ${fmtSpread(d.cpu.cores, 2)}).`,
      );
    }
  }
  return out.join(' ');
}
