/**
 * A small seeded PRNG for the built-in dataset. Generation must be
 * reproducible byte for byte from a seed, so nothing here may touch
 * Math.random or the clock.
 */

/** Murmur3's 32-bit finaliser: spreads nearby seeds over the whole state space. */
function mix32(value: number): number {
  let h = value >>> 0;
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

/** FNV-1a over UTF-16 code units; enough to turn a label into 32 bits. */
function fnv1a(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  }
  return h >>> 0;
}

/** A seed for an independent stream, so adding a stream never shifts the others. */
export function deriveSeed(seed: number, label: string): number {
  return mix32((seed >>> 0) ^ fnv1a(label));
}

export class Rng {
  private state: number;

  constructor(readonly seed: number) {
    this.state = seed >>> 0;
  }

  /** mulberry32 (Tommy Ettinger, public domain): a uniform float in [0, 1). */
  float(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** An integer in [min, max], both inclusive. */
  int(min: number, max: number): number {
    return min + Math.floor(this.float() * (max - min + 1));
  }

  chance(probability: number): boolean {
    return this.float() < probability;
  }

  pick<T>(items: readonly T[]): T {
    const item = items[Math.floor(this.float() * items.length)];
    if (item === undefined) throw new RangeError('pick() from an empty list');
    return item;
  }

  /** Picks with relative weights, e.g. `[['delivered', 6], ['cancelled', 1]]`. */
  weighted<T>(choices: readonly (readonly [T, number])[]): T {
    const total = choices.reduce((sum, [, weight]) => sum + weight, 0);
    let target = this.float() * total;
    for (const [item, weight] of choices) {
      target -= weight;
      if (target < 0) return item;
    }
    const last = choices[choices.length - 1];
    if (last === undefined) throw new RangeError('weighted() from an empty list');
    return last[0];
  }

  /** A shuffled copy (Fisher-Yates). */
  shuffle<T>(items: readonly T[]): T[] {
    const out = [...items];
    for (let i = out.length - 1; i > 0; i--) {
      const j = Math.floor(this.float() * (i + 1));
      const a = out[i] as T;
      out[i] = out[j] as T;
      out[j] = a;
    }
    return out;
  }

  /** `count` distinct items (fewer if the list is shorter). */
  sample<T>(items: readonly T[], count: number): T[] {
    return this.shuffle(items).slice(0, count);
  }

  /** An amount of money with cents, uniform in [min, max]. */
  money(min: number, max: number): number {
    return Math.round((min + this.float() * (max - min)) * 100) / 100;
  }

  /** An independent child stream named by `label`. */
  fork(label: string): Rng {
    return new Rng(deriveSeed(this.seed, label));
  }
}
