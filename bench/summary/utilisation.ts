/** How much of maxConcurrency the handlers and the held slots filled, over a backlog. */
import type { UtilisationSample } from '../scenarios/utilisation.ts';
import type { Row, UtilisationDetail } from '../summary-model.ts';
import { spread } from '../support/stats.ts';
import { cpuPerBatch, withCpu } from './cpu-per-batch.ts';
import { judge, TARGETS } from './targets.ts';

/** `ok` is the runs that finished; none gives no rows. */
export function utilisationRows(ok: UtilisationSample[]): Row[] {
  const first = ok[0];
  if (!first) return [];
  const setting = `concurrency ${first.maxConcurrency}, batch ${first.batchSize}, handler 50 ± 40 ms`;
  const handlers = spread(ok.map((x) => x.handlerUtilisation));
  return [
    {
      key: 'utilisation:handlers',
      group: 'Utilisation',
      figure: 'running handlers ÷ maxConcurrency',
      setting,
      unit: '',
      host: handlers,
      target: `≥ ${TARGETS.handlerUtilisation}`,
      verdict: judge(handlers.median, (v) => v >= TARGETS.handlerUtilisation),
      digits: 2,
    },
    {
      key: 'utilisation:slots',
      group: 'Utilisation',
      figure: 'slots held ÷ maxConcurrency',
      setting,
      unit: '',
      host: spread(ok.map((x) => x.slotUtilisation)),
      verdict: '—',
      digits: 2,
    },
  ];
}

export function utilisationDetail(ok: UtilisationSample[]): UtilisationDetail | undefined {
  if (ok.length === 0) return undefined;
  return {
    meanHandlerMs: spread(ok.map((x) => x.meanHandlerMs)),
    meanSlotMs: spread(ok.map((x) => x.meanSlotMs)),
    peakHandlers: Math.max(...ok.map((x) => x.peakHandlers)),
    maxConcurrency: ok[0]!.maxConcurrency,
    ...withCpu(cpuPerBatch(ok.map((x) => ({ host: { cpu: x.cpu, batches: x.batches } })))),
  };
}
