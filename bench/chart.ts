/**
 * The results chart: throughput (Host beside the raw baseline), cost per million messages by
 * part (with Cloudflare's price and the targets), and latency p50/p99 beside the bare write.
 */

import { fmt } from './format.ts';
import { Canvas, type Rgb } from './png.ts';
import { PRICES } from './pricing.ts';
import type { Summary } from './summary-model.ts';

/** The charts' colours, shared with the traffic-shape chart. */
export const INK: Rgb = [30, 30, 30];
export const GRID: Rgb = [225, 225, 225];
export const HOST: Rgb = [31, 119, 180];
const BASE: Rgb = [150, 150, 150];
export const TARGET: Rgb = [214, 39, 40];
export const CLOUDFLARE: Rgb = [243, 128, 32];
const PARTS: { key: keyof Summary['costs'][number]['breakdown']; label: string; color: Rgb }[] = [
  { key: 'stepFunctions', label: 'SFN', color: [148, 103, 189] },
  { key: 'dynamoWrites', label: 'DDB writes', color: [44, 160, 44] },
  { key: 'dynamoReads', label: 'DDB reads', color: [152, 223, 138] },
  { key: 'sqs', label: 'SQS', color: [31, 119, 180] },
  { key: 'lambdaRequests', label: 'Lambda req', color: [255, 187, 120] },
  { key: 'lambdaDuration', label: 'Lambda GB-s', color: [255, 127, 14] },
  { key: 'logs', label: 'Logs', color: [140, 86, 75] },
];

interface Bar {
  value: number;
  min?: number;
  max?: number;
  color: Rgb;
  stack?: { value: number; color: Rgb }[];
}

interface Panel {
  x: number;
  y: number;
  w: number;
  h: number;
  title: string;
  groups: { label: string; bars: Bar[] }[];
  log?: boolean;
  unit: string;
  refs?: {
    value: number;
    color: Rgb;
    label: string;
    fromGroup?: number;
    toGroup?: number;
    labelAt?: 'start' | 'end';
  }[];
  legend: { label: string; color: Rgb }[];
}

function niceMax(v: number): number {
  if (!(v > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 2.5, 5, 10]) if (v <= m * p) return m * p;
  return 10 * p;
}

function drawPanel(c: Canvas, p: Panel): void {
  c.text(p.x, p.y, p.title, INK, 2);
  let lx = p.x + Canvas.textWidth(p.title) + 30;
  for (const l of p.legend) {
    c.fillRect(lx, p.y, 14, 14, l.color);
    c.text(lx + 20, p.y, l.label, INK, 2);
    lx += 20 + Canvas.textWidth(l.label) + 24;
  }
  const left = p.x + 90;
  const top = p.y + 34;
  const bottom = p.y + p.h - 40;
  const right = p.x + p.w;
  const values = p.groups.flatMap((g) => g.bars.flatMap((b) => [b.max ?? b.value, b.value]));
  const refMax = Math.max(0, ...(p.refs ?? []).map((r) => r.value));
  const vmax = Math.max(...values.filter(Number.isFinite), refMax);
  const positive = [...values, ...p.groups.flatMap((g) => g.bars.map((b) => b.min ?? b.value))].filter(
    (v) => Number.isFinite(v) && v > 0,
  );
  const lo = p.log
    ? 10 ** Math.floor(Math.log10(Math.min(...positive, refMax || Number.POSITIVE_INFINITY)))
    : 0;
  const hi = p.log ? 10 ** Math.ceil(Math.log10(vmax)) : niceMax(vmax * 1.1);
  const yOf = (v: number) => {
    if (p.log) {
      const t = (Math.log10(Math.max(v, lo)) - Math.log10(lo)) / (Math.log10(hi) - Math.log10(lo));
      return bottom - t * (bottom - top);
    }
    return bottom - (v / hi) * (bottom - top);
  };
  // grid and axis labels
  const ticks: number[] = [];
  if (p.log) for (let v = lo; v <= hi * 1.0001; v *= 10) ticks.push(v);
  else for (let i = 0; i <= 5; i++) ticks.push((hi * i) / 5);
  for (const t of ticks) {
    const y = yOf(t);
    c.line(left, y, right, y, GRID, 1);
    const label = t === 0 || t >= 100 ? fmt(t, 0) : t >= 1 ? fmt(t, t % 1 === 0 ? 0 : 1) : fmt(t, 2);
    c.text(left - 8 - Canvas.textWidth(label), y - 7, label, INK, 2);
  }
  c.textUp(p.x, bottom, p.unit, INK, 2);
  c.line(left, top, left, bottom, INK, 2);
  c.line(left, bottom, right, bottom, INK, 2);
  const groupW = (right - left) / Math.max(1, p.groups.length);
  p.groups.forEach((g, gi) => {
    const gx = left + gi * groupW;
    const barW = Math.min(60, (groupW * 0.7) / Math.max(1, g.bars.length));
    const startX = gx + (groupW - barW * g.bars.length) / 2;
    g.bars.forEach((b, bi) => {
      const x = startX + bi * barW;
      if (b.stack) {
        let acc = 0;
        for (const part of b.stack) {
          const y0 = yOf(acc);
          acc += part.value;
          const y1 = yOf(acc);
          c.fillRect(x + 2, y1, barW - 4, y0 - y1, part.color);
        }
      } else if (Number.isFinite(b.value)) {
        const y = yOf(b.value);
        c.fillRect(x + 2, y, barW - 4, bottom - y, b.color);
      }
      if (b.min !== undefined && b.max !== undefined && Number.isFinite(b.min) && Number.isFinite(b.max)) {
        const cx = x + barW / 2;
        c.line(cx, yOf(b.min), cx, yOf(b.max), INK, 2);
        c.line(cx - 6, yOf(b.min), cx + 6, yOf(b.min), INK, 2);
        c.line(cx - 6, yOf(b.max), cx + 6, yOf(b.max), INK, 2);
      }
      if (Number.isFinite(b.value)) {
        const label = b.value >= 100 ? fmt(b.value, 0) : b.value >= 10 ? fmt(b.value, 1) : fmt(b.value, 2);
        const y = yOf(b.max ?? b.value) - 18;
        c.text(x + barW / 2 - Canvas.textWidth(label, 1) / 2, y, label, INK, 1);
      }
    });
    const lw = Canvas.textWidth(g.label, 1);
    c.text(gx + groupW / 2 - lw / 2, bottom + 10, g.label, INK, 1);
  });
  for (const r of p.refs ?? []) {
    const from = left + (r.fromGroup ?? 0) * groupW;
    const to = left + ((r.toGroup ?? p.groups.length - 1) + 1) * groupW;
    const y = yOf(r.value);
    c.dashed(from, to, y, r.color);
    const lx = r.labelAt === 'start' ? from + 4 : to - Canvas.textWidth(r.label, 1) - 4;
    c.text(lx, y - 12, r.label, r.color, 1);
  }
}

export function renderChart(summary: Summary, title: string): Buffer {
  const width = 1400;
  const height = 1240;
  const c = new Canvas(width, height);
  c.text(30, 20, title, INK, 3);
  const tp = summary.rows.filter((r) => r.group === 'Throughput');
  drawPanel(c, {
    x: 30,
    y: 70,
    w: width - 60,
    h: 360,
    title: 'Throughput, messages/s',
    unit: 'msg/s',
    legend: [
      { label: 'Host', color: HOST },
      { label: 'raw SQS loop', color: BASE },
    ],
    groups: tp.map((r) => ({
      label: r.setting
        .replace(/, \d+ msgs$/, '')
        .replace('batch ', 'B')
        .replace(' / concurrency ', ' C'),
      bars: [
        { value: r.host.median, min: r.host.min, max: r.host.max, color: HOST },
        { value: r.baseline?.median ?? Number.NaN, min: r.baseline?.min, max: r.baseline?.max, color: BASE },
      ],
    })),
  });
  const costs = summary.costs;
  const b10 = costs.filter((x) => x.batchSize === 10).length;
  drawPanel(c, {
    x: 30,
    y: 460,
    w: width - 60,
    h: 380,
    title: 'Cost, USD per million messages',
    unit: 'USD',
    legend: PARTS.map((p) => ({ label: p.label, color: p.color })),
    groups: costs.map((x) => ({
      label: `B${x.batchSize} C${x.concurrency}`,
      bars: [
        {
          value: x.breakdown.total,
          min: x.perMillion.min,
          max: x.perMillion.max,
          color: HOST,
          stack: PARTS.map((p) => ({ value: x.breakdown[p.key], color: p.color })),
        },
      ],
    })),
    refs: [
      {
        value: PRICES.cloudflareQueuesPerMillionMessages,
        color: CLOUDFLARE,
        label: 'Cloudflare $1.20',
        labelAt: 'start' as const,
      },
      ...(b10 > 0
        ? [{ value: 0.6, color: TARGET, label: 'target $0.60', fromGroup: 0, toGroup: b10 - 1 }]
        : []),
      ...(costs.length > b10
        ? [{ value: 0.3, color: TARGET, label: 'target $0.30', fromGroup: b10, toGroup: costs.length - 1 }]
        : []),
    ],
  });
  const lat = summary.rows.filter((r) => r.group === 'Latency' && r.figure.endsWith('p99'));
  drawPanel(c, {
    x: 30,
    y: 870,
    w: width - 60,
    h: 350,
    title: 'Latency p99, ms (log scale)',
    unit: 'ms',
    log: true,
    legend: [
      { label: 'Host', color: HOST },
      { label: 'bare conditional write', color: BASE },
    ],
    groups: lat.map((r) => ({
      label: r.figure
        .replace(' p99', '')
        .replace(
          'send → handler, idle consumer',
          `send>handler t${r.setting.match(/Seconds (\d+)/)?.[1] ?? ''}`,
        )
        .replace('Operation create → succeeded', 'op create>done')
        .replace('acknowledgeAll()', 'ackAll()')
        .replace('acknowledge()', 'ack()'),
      bars: [
        { value: r.host.median, min: r.host.min, max: r.host.max, color: HOST },
        ...(r.baseline
          ? [{ value: r.baseline.median, min: r.baseline.min, max: r.baseline.max, color: BASE }]
          : []),
      ],
    })),
  });
  return c.toPng();
}
