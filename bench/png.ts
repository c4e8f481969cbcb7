/**
 * A minimal raster canvas and PNG encoder (8-bit RGB, no filtering, zlib from node:zlib), with a
 * 5×7 bitmap font drawn for this bench. Enough for bar charts; no dependency, same bytes on
 * every machine.
 */
import { crc32, deflateSync } from 'node:zlib';

export type Rgb = readonly [number, number, number];

/** Glyph rows, top to bottom; `#` is ink. Lower case is drawn with the upper-case glyphs. */
const GLYPHS: Record<string, string> = {
  A: '.###.|#...#|#...#|#####|#...#|#...#|#...#',
  B: '####.|#...#|#...#|####.|#...#|#...#|####.',
  C: '.###.|#...#|#....|#....|#....|#...#|.###.',
  D: '####.|#...#|#...#|#...#|#...#|#...#|####.',
  E: '#####|#....|#....|####.|#....|#....|#####',
  F: '#####|#....|#....|####.|#....|#....|#....',
  G: '.###.|#...#|#....|#.###|#...#|#...#|.####',
  H: '#...#|#...#|#...#|#####|#...#|#...#|#...#',
  I: '.###.|..#..|..#..|..#..|..#..|..#..|.###.',
  J: '..###|...#.|...#.|...#.|...#.|#..#.|.##..',
  K: '#...#|#..#.|#.#..|##...|#.#..|#..#.|#...#',
  L: '#....|#....|#....|#....|#....|#....|#####',
  M: '#...#|##.##|#.#.#|#.#.#|#...#|#...#|#...#',
  N: '#...#|##..#|#.#.#|#..##|#...#|#...#|#...#',
  O: '.###.|#...#|#...#|#...#|#...#|#...#|.###.',
  P: '####.|#...#|#...#|####.|#....|#....|#....',
  Q: '.###.|#...#|#...#|#...#|#.#.#|#..#.|.##.#',
  R: '####.|#...#|#...#|####.|#.#..|#..#.|#...#',
  S: '.####|#....|#....|.###.|....#|....#|####.',
  T: '#####|..#..|..#..|..#..|..#..|..#..|..#..',
  U: '#...#|#...#|#...#|#...#|#...#|#...#|.###.',
  V: '#...#|#...#|#...#|#...#|#...#|.#.#.|..#..',
  W: '#...#|#...#|#...#|#.#.#|#.#.#|#.#.#|.#.#.',
  X: '#...#|#...#|.#.#.|..#..|.#.#.|#...#|#...#',
  Y: '#...#|#...#|.#.#.|..#..|..#..|..#..|..#..',
  Z: '#####|....#|...#.|..#..|.#...|#....|#####',
  '0': '.###.|#...#|#..##|#.#.#|##..#|#...#|.###.',
  '1': '..#..|.##..|..#..|..#..|..#..|..#..|.###.',
  '2': '.###.|#...#|....#|...#.|..#..|.#...|#####',
  '3': '####.|....#|....#|.###.|....#|....#|####.',
  '4': '...#.|..##.|.#.#.|#..#.|#####|...#.|...#.',
  '5': '#####|#....|####.|....#|....#|#...#|.###.',
  '6': '.###.|#....|#....|####.|#...#|#...#|.###.',
  '7': '#####|....#|...#.|..#..|.#...|.#...|.#...',
  '8': '.###.|#...#|#...#|.###.|#...#|#...#|.###.',
  '9': '.###.|#...#|#...#|.####|....#|....#|.###.',
  ' ': '.....|.....|.....|.....|.....|.....|.....',
  '.': '.....|.....|.....|.....|.....|.##..|.##..',
  ',': '.....|.....|.....|.....|.##..|..#..|.#...',
  ':': '.....|.##..|.##..|.....|.##..|.##..|.....',
  '-': '.....|.....|.....|#####|.....|.....|.....',
  '+': '.....|..#..|..#..|#####|..#..|..#..|.....',
  '/': '....#|....#|...#.|..#..|.#...|#....|#....',
  '(': '...#.|..#..|.#...|.#...|.#...|..#..|...#.',
  ')': '.#...|..#..|...#.|...#.|...#.|..#..|.#...',
  '%': '##..#|##..#|...#.|..#..|.#...|#..##|#..##',
  $: '..#..|.####|#.#..|.###.|..#.#|####.|..#..',
  '=': '.....|.....|#####|.....|#####|.....|.....',
  '<': '...#.|..#..|.#...|#....|.#...|..#..|...#.',
  '>': '.#...|..#..|...#.|....#|...#.|..#..|.#...',
  '[': '.###.|.#...|.#...|.#...|.#...|.#...|.###.',
  ']': '.###.|...#.|...#.|...#.|...#.|...#.|.###.',
  '*': '.....|#.#.#|.###.|#####|.###.|#.#.#|.....',
  '|': '..#..|..#..|..#..|..#..|..#..|..#..|..#..',
  '#': '.#.#.|.#.#.|#####|.#.#.|#####|.#.#.|.#.#.',
  '?': '.###.|#...#|....#|...#.|..#..|.....|..#..',
  '×': '.....|#...#|.#.#.|..#..|.#.#.|#...#|.....',
  '÷': '.....|..#..|.....|#####|.....|..#..|.....',
  '±': '..#..|..#..|#####|..#..|..#..|.....|#####',
  '≥': '.#...|..#..|...#.|..#..|.#...|.....|#####',
  '≤': '...#.|..#..|.#...|..#..|...#.|.....|#####',
  "'": '..#..|..#..|.#...|.....|.....|.....|.....',
};

const FONT = new Map<string, boolean[][]>(
  Object.entries(GLYPHS).map(([ch, rows]) => [ch, rows.split('|').map((r) => [...r].map((c) => c === '#'))]),
);

export class Canvas {
  readonly width: number;
  readonly height: number;
  private readonly pixels: Uint8Array;

  constructor(width: number, height: number, background: Rgb = [255, 255, 255]) {
    this.width = width;
    this.height = height;
    this.pixels = new Uint8Array(width * height * 3);
    this.fillRect(0, 0, width, height, background);
  }

  setPixel(x: number, y: number, c: Rgb): void {
    const xi = Math.round(x);
    const yi = Math.round(y);
    if (xi < 0 || yi < 0 || xi >= this.width || yi >= this.height) return;
    const i = (yi * this.width + xi) * 3;
    this.pixels[i] = c[0];
    this.pixels[i + 1] = c[1];
    this.pixels[i + 2] = c[2];
  }

  fillRect(x: number, y: number, w: number, h: number, c: Rgb): void {
    const x0 = Math.max(0, Math.round(x));
    const y0 = Math.max(0, Math.round(y));
    const x1 = Math.min(this.width, Math.round(x + w));
    const y1 = Math.min(this.height, Math.round(y + h));
    for (let yy = y0; yy < y1; yy++) for (let xx = x0; xx < x1; xx++) this.setPixel(xx, yy, c);
  }

  /** A straight line `thickness` pixels wide (square brush). */
  line(x0: number, y0: number, x1: number, y1: number, c: Rgb, thickness = 1): void {
    const steps = Math.max(1, Math.ceil(Math.max(Math.abs(x1 - x0), Math.abs(y1 - y0))));
    const half = Math.floor(thickness / 2);
    for (let s = 0; s <= steps; s++) {
      const x = x0 + ((x1 - x0) * s) / steps;
      const y = y0 + ((y1 - y0) * s) / steps;
      this.fillRect(x - half, y - half, thickness, thickness, c);
    }
  }

  /** A dashed horizontal line. */
  dashed(x0: number, x1: number, y: number, c: Rgb, dash = 6): void {
    for (let x = x0; x < x1; x += dash * 2) this.line(x, y, Math.min(x + dash, x1), y, c, 2);
  }

  static textWidth(text: string, scale = 2): number {
    return text.length * 6 * scale - scale;
  }

  /** Text with its top-left corner at (x, y); 5×7 glyphs, one column of spacing, scaled. */
  text(x: number, y: number, text: string, c: Rgb = [0, 0, 0], scale = 2): void {
    let cx = x;
    for (const raw of text) {
      const glyph = FONT.get(raw) ?? FONT.get(raw.toUpperCase()) ?? FONT.get('?');
      if (glyph) {
        for (let r = 0; r < 7; r++) {
          for (let col = 0; col < 5; col++) {
            if (glyph[r]?.[col]) this.fillRect(cx + col * scale, y + r * scale, scale, scale, c);
          }
        }
      }
      cx += 6 * scale;
    }
  }

  /** Text rotated a quarter turn counter-clockwise, reading bottom to top, starting at (x, y). */
  textUp(x: number, y: number, text: string, c: Rgb = [0, 0, 0], scale = 2): void {
    let cy = y;
    for (const raw of text) {
      const glyph = FONT.get(raw) ?? FONT.get(raw.toUpperCase()) ?? FONT.get('?');
      if (glyph) {
        for (let r = 0; r < 7; r++) {
          for (let col = 0; col < 5; col++) {
            if (glyph[r]?.[col]) this.fillRect(x + r * scale, cy - col * scale - scale, scale, scale, c);
          }
        }
      }
      cy -= 6 * scale;
    }
  }

  toPng(): Buffer {
    const raw = Buffer.alloc((this.width * 3 + 1) * this.height);
    for (let y = 0; y < this.height; y++) {
      const row = y * (this.width * 3 + 1);
      raw[row] = 0; // filter: none
      raw.set(this.pixels.subarray(y * this.width * 3, (y + 1) * this.width * 3), row + 1);
    }
    const header = Buffer.alloc(13);
    header.writeUInt32BE(this.width, 0);
    header.writeUInt32BE(this.height, 4);
    header[8] = 8; // bit depth
    header[9] = 2; // colour type: RGB
    header[10] = 0; // compression
    header[11] = 0; // filter method
    header[12] = 0; // no interlace
    return Buffer.concat([
      Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
      chunk('IHDR', header),
      chunk('IDAT', deflateSync(raw, { level: 9 })),
      chunk('IEND', Buffer.alloc(0)),
    ]);
  }
}

function chunk(type: string, data: Buffer): Buffer {
  const length = Buffer.alloc(4);
  length.writeUInt32BE(data.length, 0);
  const typed = Buffer.concat([Buffer.from(type, 'ascii'), data]);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(typed) >>> 0, 0);
  return Buffer.concat([length, typed, crc]);
}
