/**
 * Seeded random streams: one per service, label, operation and kind of fault, so the same seed
 * and the same sequence of calls give the same faults.
 */

/** mulberry32: small, fast, and the same sequence for the same seed on every machine. */
function generator(seed: number): () => number {
  let state = seed >>> 0 || 0x9e3779b9;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/** FNV-1a of a string, to derive one independent stream per (seed, service, label, operation, kind). */
function hash(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

export class Streams {
  private readonly streams = new Map<string, () => number>();
  private readonly prefix: string;

  constructor(prefix: string) {
    this.prefix = prefix;
  }

  next(key: string): number {
    let g = this.streams.get(key);
    if (!g) {
      g = generator(hash(`${this.prefix}|${key}`));
      this.streams.set(key, g);
    }
    return g();
  }

  /** An integer in [min, max]. */
  int(key: string, min: number, max: number): number {
    return min + Math.floor(this.next(key) * (max - min + 1));
  }

  /** `k` distinct indexes of 0..n-1, in ascending order. */
  pick(key: string, n: number, k: number): Set<number> {
    const all = Array.from({ length: n }, (_, i) => i);
    for (let i = n - 1; i > 0; i--) {
      const j = this.int(key, 0, i);
      [all[i], all[j]] = [all[j] as number, all[i] as number];
    }
    return new Set(all.slice(0, k));
  }
}
