/**
 * The project's seeded pseudo-random generators, in one place. None touches Math.random or the
 * clock, and all use 32-bit integer arithmetic, so a seed gives the same stream on every platform.
 * Not cryptographic.
 *
 * - `mulberry32(seed)` / `Mulberry32` (Tommy Ettinger, public domain): 32-bit state, for picking
 *   actions and questions, the built-in dataset, test inputs.
 * - `Xoshiro128` (xoshiro128**, Blackman & Vigna, https://prng.di.unimi.it/, seeded through
 *   splitmix32) with Box–Muller normals: weight initialisation.
 *
 * Datasets, model weights and sampling seeds are pinned by tests to these exact streams: any change
 * to the arithmetic or to the order of draws in a method changes them.
 */

/** Murmur3's 32-bit finaliser: spreads nearby values over the whole 32-bit range. */
export function mix32(value: number): number {
  let h = value >>> 0;
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

/** Mix two integers into one 32-bit seed (golden-ratio multiply, then the Murmur3 finaliser). */
export function mixSeeds(a: number, b: number): number {
  return mix32(Math.imul(a >>> 0, 0x9e3779b1) ^ (b >>> 0));
}

/** Stable 32-bit hash of a string (FNV-1a over UTF-16 code units), for deriving seeds from ids. */
export function hashString(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  }
  return h >>> 0;
}

/** A seed for an independent stream named by `label`, so adding a stream never shifts the others. */
export function deriveSeed(seed: number, label: string): number {
  return mix32((seed >>> 0) ^ hashString(label));
}

/** mulberry32 as a function: each call returns a uniform float in [0, 1). */
export function mulberry32(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Picks one item with a uniform draw from `next`. */
export function pick<T>(next: () => number, items: readonly T[]): T {
  if (items.length === 0) throw new RangeError('pick from an empty list');
  return items[Math.floor(next() * items.length)] as T;
}

/** mulberry32 with the helpers a generator of data needs; every helper draws from `float()`. */
export class Mulberry32 {
  readonly #next: () => number;

  constructor(readonly seed: number) {
    this.#next = mulberry32(seed);
  }

  /** A uniform float in [0, 1). */
  float(): number {
    return this.#next();
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

  /** An amount with cents, uniform in [min, max]. */
  money(min: number, max: number): number {
    return Math.round((min + this.float() * (max - min)) * 100) / 100;
  }

  /** An independent child stream named by `label`. */
  fork(label: string): Mulberry32 {
    return new Mulberry32(deriveSeed(this.seed, label));
  }
}

/** xoshiro128** seeded through splitmix32, with Box–Muller normals. */
export class Xoshiro128 {
  #s0: number;
  #s1: number;
  #s2: number;
  #s3: number;
  #spareNormal: number | undefined;

  constructor(seed: number) {
    let x = seed >>> 0;
    const next = (): number => {
      // splitmix32
      x = (x + 0x9e3779b9) >>> 0;
      return mix32(x);
    };
    this.#s0 = next();
    this.#s1 = next();
    this.#s2 = next();
    this.#s3 = next();
  }

  /** Uniform 32-bit unsigned integer. */
  nextUint32(): number {
    const result = Math.imul(rotl(Math.imul(this.#s1, 5) >>> 0, 7), 9) >>> 0;
    const t = (this.#s1 << 9) >>> 0;
    this.#s2 = (this.#s2 ^ this.#s0) >>> 0;
    this.#s3 = (this.#s3 ^ this.#s1) >>> 0;
    this.#s1 = (this.#s1 ^ this.#s2) >>> 0;
    this.#s0 = (this.#s0 ^ this.#s3) >>> 0;
    this.#s2 = (this.#s2 ^ t) >>> 0;
    this.#s3 = rotl(this.#s3, 11);
    return result;
  }

  /** Uniform in [0, 1). */
  uniform(): number {
    return this.nextUint32() / 4294967296;
  }

  /** Standard normal (the second value of each Box–Muller pair is kept for the next call). */
  normal(): number {
    if (this.#spareNormal !== undefined) {
      const spare = this.#spareNormal;
      this.#spareNormal = undefined;
      return spare;
    }
    const u = 1 - this.uniform(); // (0, 1]: log is finite
    const v = this.uniform();
    const radius = Math.sqrt(-2 * Math.log(u));
    this.#spareNormal = radius * Math.sin(2 * Math.PI * v);
    return radius * Math.cos(2 * Math.PI * v);
  }

  /** A Float32Array of normals with the given mean and standard deviation. */
  normalArray(length: number, std: number, mean = 0): Float32Array {
    const out = new Float32Array(length);
    for (let i = 0; i < length; i++) out[i] = mean + std * this.normal();
    return out;
  }
}

/** `count` standard normals from a uniform source (Box–Muller, the cosine half only). */
export function boxMullerNormals(next: () => number, count: number): number[] {
  const out: number[] = [];
  while (out.length < count) {
    const u = Math.max(next(), 1e-12);
    const v = next();
    out.push(Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v));
  }
  return out;
}

function rotl(x: number, k: number): number {
  return ((x << k) | (x >>> (32 - k))) >>> 0;
}
