/**
 * A traffic-shape run's samples turned into its figures: per arrival rate, USD per million
 * messages by part with the counts behind them, Lambda with an SQS event source mapping and
 * Cloudflare Queues beside it, and met or missed. The streams are measured; the sparse rates are
 * composed from the episodes (`compose.ts`).
 */
import { fmt } from '../format.ts';
import { isDelivery } from '../per-batch.ts';
import { PRICES, scale, usd } from '../pricing.ts';
import type { Row } from '../summary-model.ts';
import { median, spread } from '../support/stats.ts';
import {
  composeTrickle,
  countsOf,
  type Episode,
  episodeOf,
  judgeShape,
  lambdaEsm,
  messagesPerBatch,
  scaleCounts,
  shapeTarget,
} from './compose.ts';
import type { ShapeFigure, ShapesSamples, ShapesSummary, StreamSample } from './model.ts';

/** `1 a minute`, `1 every 10 s`, `1 a second`, `1,000 a second`. */
export function rateLabel(rate: number): string {
  if (rate >= 1) return `${fmt(rate, 0)} a second`;
  const gap = Math.round(1 / rate);
  return gap === 60 ? '1 a minute' : `1 every ${fmt(gap, 0)} s`;
}

type Common = Pick<ShapeFigure, 'esm' | 'cloudflare' | 'target' | 'verdict'>;

function beside(rate: number, total: number, s: ShapesSamples, handlerMs: number): Common {
  const esm = lambdaEsm(rate, {
    maxBatchSize: s.config.consumer.maxBatchSize,
    windowSeconds: s.config.consumer.maxBatchTimeoutSeconds,
    handlerMs,
  });
  const target = shapeTarget(rate);
  return {
    esm,
    cloudflare: PRICES.cloudflareQueuesPerMillionMessages,
    target,
    verdict: judgeShape(total, esm.total, target),
  };
}

/** A stream's window, per message sent in it (a run without that count: per message finalised). */
function streamFigure(s: ShapesSamples, st: StreamSample, handlerMs: number): ShapeFigure {
  const h = st.host;
  const messages = Math.max(1, h.sentInWindow ?? h.batchMessages);
  const perMillion = scale(usd(h.tally, isDelivery), 1e6 / messages);
  const counts = countsOf(h.tally);
  const tail = h.tail;
  return {
    label: rateLabel(st.rate),
    rate: st.rate,
    how: 'stream',
    perMillion,
    perMessage: scaleCounts(counts, 1 / messages),
    messagesPerBatch: h.batchMessages / Math.max(1, h.batches),
    sentPerSecond: messages / h.windowSeconds,
    handledPerSecond: h.perSecond,
    producerLagMs: h.producer.maxLagMs,
    meanLanes: (counts.gbSeconds.worker ?? 0) / (PRICES.lambdaMemoryMb.worker / 1024) / h.windowSeconds,
    ...(tail
      ? {
          tail: {
            usd: usd(tail.tally, isDelivery).total,
            lanes: tail.lanes,
            seconds: tail.seconds,
            ended: tail.ended,
          },
        }
      : {}),
    ...beside(st.rate, perMillion.total, s, handlerMs),
  };
}

function composedFigures(s: ShapesSamples, isolated: Episode, keptAlive: Episode, handlerMs: number) {
  return s.config.composedGaps.map((gap): ShapeFigure => {
    const rate = 1 / gap;
    const c = composeTrickle(gap, isolated, keptAlive);
    const perMillion = scale(c.usd, 1e6);
    return {
      label: rateLabel(rate),
      rate,
      how: c.how,
      perMillion,
      perMessage: c.counts,
      messagesPerBatch: messagesPerBatch(
        rate,
        s.config.consumer.maxBatchSize,
        s.config.consumer.maxBatchTimeoutSeconds,
      ),
      ...beside(rate, perMillion.total, s, handlerMs),
    };
  });
}

export function summariseShapes(s: ShapesSamples): ShapesSummary {
  const iso = s.isolated?.ok ? s.isolated : undefined;
  const alive = s.keptAlive?.ok ? s.keptAlive : undefined;
  const handlerMs = median([
    ...s.streams.flatMap((x) => x.host.handlerMs ?? []),
    ...(iso?.handlerMs ?? []),
    ...(alive?.handlerMs ?? []),
  ]);
  const handler = Number.isFinite(handlerMs) ? handlerMs : 0;
  const errors = s.errors.map((e) => `${e.scenario}: ${e.error}`);
  for (const [name, e] of [
    ['the isolated message', s.isolated],
    ['the kept-alive lane', s.keptAlive],
  ] as const)
    if (e && !e.ok) errors.push(`${name} did not end within the bench's bound: no composed figure`);
  let episodes: ShapesSummary['episodes'];
  const figures: ShapeFigure[] = [];
  if (iso && alive) {
    const isolated = episodeOf(iso.tally, iso);
    const keptAlive = episodeOf(alive.tally, alive);
    figures.push(...composedFigures(s, isolated, keptAlive, handler));
    episodes = {
      isolated: { seconds: iso.seconds, usd: isolated.usd.total, counts: isolated.counts },
      keptAlive: {
        messages: alive.messages,
        gapSeconds: alive.gapSeconds,
        seconds: alive.seconds,
        usd: keptAlive.usd.total,
        counts: keptAlive.counts,
      },
    };
  }
  figures.push(...s.streams.map((st) => streamFigure(s, st, handler)));
  figures.sort((a, b) => a.rate - b.rate);
  const st = s.straight;
  if (st && !(st.ok && st.firstDeliveredSeconds !== undefined))
    errors.push('the message sent straight to SQS was not delivered within the bench’s bound');
  const pickup =
    st?.ok && st.firstDeliveredSeconds !== undefined
      ? { seconds: st.firstDeliveredSeconds, supervisorSeconds: st.supervisorSeconds ?? 60 }
      : undefined;
  return {
    mode: s.config.mode,
    consumer: s.config.consumer,
    idleWaitSeconds: s.config.idleWaitSeconds,
    windowSeconds: s.config.timing.seconds,
    handlerMs: handler,
    figures,
    ...(episodes ? { episodes } : {}),
    ...(pickup ? { pickup } : {}),
    errors,
  };
}

/** The target as the tables print it. */
export const targetText = (t: ShapeFigure['target']) =>
  `≤ $${fmt(t.usd, 2)}${t.esmRatio !== undefined ? ` and ≤ ${t.esmRatio}× Lambda + SQS ESM` : ''}`;

/** One row per figure for the results table (and its count of targets met). */
export function shapeRows(s: ShapesSummary): Row[] {
  return s.figures.map((f) => ({
    key: `shape:${f.label}`,
    group: 'Cost',
    figure: 'USD per million messages by arrival rate',
    setting: `${f.label}${f.how === 'stream' ? '' : ` (composed: ${f.how})`}`,
    unit: 'USD',
    host: spread([f.perMillion.total]),
    baselineLabel: 'Lambda + SQS event source mapping',
    baseline: spread([f.esm.total]),
    ratio: spread([f.perMillion.total / f.esm.total]),
    target: targetText(f.target),
    verdict: f.verdict,
    digits: 3,
  }));
}
