/**
 * float32 ⇄ bfloat16 / float16 bit conversions (Node 20 has no Float16Array).
 * bf16 → f32 is exact (`u32 = u16 << 16`); f32 → bf16/f16 round to nearest
 * even, the IEEE default that PyTorch's `.to()` uses.
 */
const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

export function bf16BitsToF32(bits: number): number {
  u32[0] = bits << 16;
  return f32[0] as number;
}

export function f32ToBf16Bits(value: number): number {
  f32[0] = value;
  const x = u32[0] as number;
  if ((x & 0x7f800000) === 0x7f800000 && (x & 0x007fffff) !== 0) return 0x7fc0; // NaN stays a (quiet) NaN
  const roundingBias = 0x7fff + ((x >>> 16) & 1);
  return ((x + roundingBias) >>> 16) & 0xffff;
}

export function f16BitsToF32(bits: number): number {
  const sign = bits & 0x8000 ? -1 : 1;
  const exponent = (bits >>> 10) & 0x1f;
  const mantissa = bits & 0x3ff;
  if (exponent === 0) return sign * mantissa * 2 ** -24; // subnormal
  if (exponent === 0x1f) return mantissa === 0 ? sign * Infinity : NaN;
  return sign * (1 + mantissa / 1024) * 2 ** (exponent - 15);
}

export function f32ToF16Bits(value: number): number {
  f32[0] = value;
  const x = u32[0] as number;
  const sign = (x >>> 16) & 0x8000;
  const exponent = (x >>> 23) & 0xff;
  let mantissa = x & 0x7fffff;
  if (exponent === 0xff) return sign | 0x7c00 | (mantissa === 0 ? 0 : 0x200);
  let e = exponent - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00; // overflow → ±Inf
  if (e <= 0) {
    if (e < -10) return sign; // underflow → ±0
    // Subnormal: shift the implicit-1 mantissa right, rounding to nearest even.
    mantissa |= 0x800000;
    const shift = 14 - e;
    const half = 1 << (shift - 1);
    const rest = mantissa & ((1 << shift) - 1);
    let m = mantissa >>> shift;
    if (rest > half || (rest === half && (m & 1) === 1)) m += 1;
    return sign | m;
  }
  const rest = mantissa & 0x1fff;
  let m = mantissa >>> 13;
  if (rest > 0x1000 || (rest === 0x1000 && (m & 1) === 1)) {
    m += 1;
    if (m === 0x400) {
      m = 0;
      e += 1;
      if (e >= 0x1f) return sign | 0x7c00;
    }
  }
  return sign | (e << 10) | m;
}
