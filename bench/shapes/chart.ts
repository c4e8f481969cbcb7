/**
 * The chart "cost per million vs arrival rate", log-log: the Host's figure at each rate (filled
 * where measured as a stream, hollow where composed), Lambda with an SQS event source mapping,
 * Cloudflare Queues and the targets.
 */
import { CLOUDFLARE, GRID, HOST, INK, TARGET } from '../chart.ts';
import { fmt } from '../format.ts';
import { Canvas, type Rgb } from '../png.ts';
import type { ShapesSummary } from './model.ts';

const ESM: Rgb = [120, 120, 120];

interface Axes {
  left: number;
  right: number;
  top: number;
  bottom: number;
  x(rate: number): number;
  y(usd: number): number;
}

function dashedLine(c: Canvas, a: [number, number], b: [number, number], color: Rgb, dash = 8): void {
  const length = Math.hypot(b[0] - a[0], b[1] - a[1]);
  for (let d = 0; d < length; d += dash * 2) {
    const t0 = d / length;
    const t1 = Math.min(1, (d + dash) / length);
    c.line(
      a[0] + (b[0] - a[0]) * t0,
      a[1] + (b[1] - a[1]) * t0,
      a[0] + (b[0] - a[0]) * t1,
      a[1] + (b[1] - a[1]) * t1,
      color,
      2,
    );
  }
}

function marker(c: Canvas, x: number, y: number, color: Rgb, filled: boolean): void {
  if (filled) {
    c.fillRect(x - 6, y - 6, 12, 12, color);
    return;
  }
  c.fillRect(x - 6, y - 6, 12, 12, [255, 255, 255]);
  for (const [a, b] of [
    [
      [x - 6, y - 6],
      [x + 6, y - 6],
    ],
    [
      [x + 6, y - 6],
      [x + 6, y + 6],
    ],
    [
      [x + 6, y + 6],
      [x - 6, y + 6],
    ],
    [
      [x - 6, y + 6],
      [x - 6, y - 6],
    ],
  ] as [number, number][][])
    c.line(a![0], a![1], b![0], b![1], color, 3);
}

const rateTick = (rate: number) =>
  rate >= 1 ? `${fmt(rate, 0)}/s` : Math.round(1 / rate) === 60 ? '1/min' : `1/${fmt(1 / rate, 0)}s`;

function axes(width: number, height: number, rates: number[], values: number[]): Axes {
  const left = 130;
  const right = width - 40;
  const top = 120;
  const bottom = height - 80;
  const x0 = Math.log10(Math.min(...rates)) - 0.3;
  const x1 = Math.log10(Math.max(...rates)) + 0.3;
  const positive = values.filter((v) => Number.isFinite(v) && v > 0);
  const y0 = Math.floor(Math.log10(Math.min(...positive)));
  const y1 = Math.ceil(Math.log10(Math.max(...positive)));
  return {
    left,
    right,
    top,
    bottom,
    x: (rate) => left + ((Math.log10(rate) - x0) / (x1 - x0)) * (right - left),
    y: (usd) => bottom - ((Math.log10(Math.max(usd, 10 ** y0)) - y0) / Math.max(1, y1 - y0)) * (bottom - top),
  };
}

function grid(c: Canvas, a: Axes, rates: number[], lo: number, hi: number): void {
  for (let e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e++) {
    const y = a.y(10 ** e);
    c.line(a.left, y, a.right, y, GRID, 1);
    const label = `$${e >= 0 ? fmt(10 ** e, 0) : fmt(10 ** e, -e)}`;
    c.text(a.left - 10 - Canvas.textWidth(label), y - 7, label, INK, 2);
  }
  for (const r of rates) {
    const x = a.x(r);
    c.line(x, a.top, x, a.bottom, GRID, 1);
    const label = rateTick(r);
    c.text(x - Canvas.textWidth(label) / 2, a.bottom + 12, label, INK, 2);
  }
  c.line(a.left, a.top, a.left, a.bottom, INK, 2);
  c.line(a.left, a.bottom, a.right, a.bottom, INK, 2);
  c.textUp(20, a.bottom - 40, 'USD per million messages', INK, 2);
  const xLabel = 'arrival rate (log scale)';
  c.text((a.left + a.right) / 2 - Canvas.textWidth(xLabel) / 2, a.bottom + 44, xLabel, INK, 2);
}

function legend(
  c: Canvas,
  x: number,
  y: number,
  items: { label: string; color: Rgb; dashed?: boolean }[],
): void {
  let lx = x;
  for (const l of items) {
    if (l.dashed) dashedLine(c, [lx, y + 7], [lx + 28, y + 7], l.color, 5);
    else c.fillRect(lx, y, 28, 14, l.color);
    c.text(lx + 36, y, l.label, INK, 2);
    lx += 36 + Canvas.textWidth(l.label) + 30;
  }
}

export function renderShapesChart(s: ShapesSummary, title: string): Buffer {
  const width = 1400;
  const height = 760;
  const c = new Canvas(width, height);
  c.text(30, 20, title, INK, 3);
  const figures = s.figures;
  if (figures.length === 0) {
    c.text(30, 80, 'no figure was measured in this run', INK, 2);
    return c.toPng();
  }
  const rates = figures.map((f) => f.rate);
  const values = figures.flatMap((f) => [f.perMillion.total, f.esm.total, f.target.usd, f.cloudflare]);
  const a = axes(width, height, rates, values);
  grid(c, a, rates, Math.min(...values.filter((v) => v > 0)), Math.max(...values));
  legend(c, 30, 66, [
    { label: 'Host (hollow: composed)', color: HOST },
    { label: 'Lambda + SQS ESM', color: ESM },
    { label: 'Cloudflare $1.20', color: CLOUDFLARE, dashed: true },
    { label: 'targets', color: TARGET, dashed: true },
  ]);
  dashedLine(c, [a.left, a.y(figures[0]!.cloudflare)], [a.right, a.y(figures[0]!.cloudflare)], CLOUDFLARE);
  // Each target over its own rates: a bound below a message a second, and 3× the mapping above.
  const stepBetween = (i: number) =>
    i + 1 < figures.length ? (a.x(figures[i]!.rate) + a.x(figures[i + 1]!.rate)) / 2 : a.right;
  figures.forEach((f, i) => {
    const from = i === 0 ? a.left : stepBetween(i - 1);
    dashedLine(c, [from, a.y(f.target.usd)], [stepBetween(i), a.y(f.target.usd)], TARGET);
    const previous = figures[i - 1];
    if (!previous || previous.target.usd !== f.target.usd)
      c.text(
        from + 6,
        a.y(f.target.usd) + 6,
        `target $${fmt(f.target.usd, f.target.usd >= 10 ? 0 : 2)}`,
        TARGET,
        2,
      );
    if (f.target.esmRatio !== undefined && previous?.target.esmRatio === undefined)
      c.text(
        a.x(f.rate) + 12,
        a.y(f.target.esmRatio * f.esm.total) - 20,
        `target ${f.target.esmRatio}x ESM`,
        TARGET,
        2,
      );
    const next = figures[i + 1];
    if (f.target.esmRatio !== undefined && next?.target.esmRatio !== undefined)
      dashedLine(
        c,
        [a.x(f.rate), a.y(f.target.esmRatio * f.esm.total)],
        [a.x(next.rate), a.y(next.target.esmRatio * next.esm.total)],
        TARGET,
        4,
      );
  });
  for (const [value, color] of [
    [(f: (typeof figures)[number]) => f.esm.total, ESM],
    [(f: (typeof figures)[number]) => f.perMillion.total, HOST],
  ] as const) {
    for (let i = 1; i < figures.length; i++) {
      const p = figures[i - 1]!;
      const q = figures[i]!;
      c.line(a.x(p.rate), a.y(value(p)), a.x(q.rate), a.y(value(q)), color, 3);
    }
  }
  for (const f of figures) {
    marker(c, a.x(f.rate), a.y(f.esm.total), ESM, true);
    marker(c, a.x(f.rate), a.y(f.perMillion.total), HOST, f.how === 'stream');
    // A stream this machine could not drive at its rate is priced at the rate it reached.
    const reached =
      f.sentPerSecond !== undefined && f.sentPerSecond < 0.95 * f.rate
        ? ` at ${fmt(f.sentPerSecond, 0)}/s`
        : '';
    const label = `$${fmt(f.perMillion.total, f.perMillion.total >= 10 ? 0 : 2)}${reached}`;
    // Above and right of its marker; where that would leave the plot, under it, clear of the
    // target lines that run just below a figure near them.
    const x = a.x(f.rate);
    const y = a.y(f.perMillion.total);
    const width = Canvas.textWidth(label);
    const fits = x + 12 + width <= a.right;
    c.text(fits ? x + 12 : a.right - width, fits ? y - 22 : y + 44, label, HOST, 2);
  }
  return c.toPng();
}
