/**
 * A small seedable PRNG for weight init and tests: splitmix32 seeding into
 * xoshiro128** (Blackman & Vigna, https://prng.di.unimi.it/), plus
 * Box–Muller normals. Deterministic across platforms (32-bit integer math).
 */
export class Rng {
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
      let z = x;
      z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
      z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
      return (z ^ (z >>> 16)) >>> 0;
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

  /** Standard normal. */
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

function rotl(x: number, k: number): number {
  return ((x << k) | (x >>> (32 - k))) >>> 0;
}
