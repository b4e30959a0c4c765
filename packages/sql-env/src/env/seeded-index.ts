/**
 * An index in [0, size) derived from a seed. Same seed and size → same index on
 * every machine and Node version (Math.random is not seedable). The seed is
 * mixed with a 32-bit finaliser (splitmix32 / murmur3 fmix) so that seeds 0, 1,
 * 2... do not walk the questions in file order.
 */
export function seededIndex(seed: number, size: number): number {
  if (size <= 0) throw new RangeError('seededIndex: size must be positive');
  // Fold seeds above 2^32 in, so large integer seeds are not all alike.
  let x = (seed >>> 0) ^ Math.floor(seed / 0x1_0000_0000);
  x = (x + 0x9e3779b9) >>> 0;
  x = Math.imul(x ^ (x >>> 16), 0x85ebca6b) >>> 0;
  x = Math.imul(x ^ (x >>> 13), 0xc2b2ae35) >>> 0;
  x = (x ^ (x >>> 16)) >>> 0;
  // x / 2^32 * size: no modulo bias worth caring about for datasets far below 2^32.
  return Math.floor((x / 0x1_0000_0000) * size);
}
