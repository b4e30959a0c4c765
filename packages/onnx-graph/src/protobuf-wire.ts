import { AppError, ErrorCode, appendAll } from '@sqlenv/shared';

/**
 * Protocol-buffer wire format, written by hand (https://protobuf.dev/programming-guides/encoding/):
 * a field is a varint tag `(number << 3) | wireType` followed by a varint,
 * 8 or 4 fixed bytes, or a varint length and that many bytes (strings,
 * bytes, nested messages, packed repeated scalars).
 */
export const WireType = { VARINT: 0, I64: 1, LEN: 2, I32: 5 } as const;
export type WireType = (typeof WireType)[keyof typeof WireType];

/** Byte arrays at least this long are referenced, not copied, until `finish()`. */
const BIG_CHUNK_BYTES = 1024;

/**
 * Append-only encoder. Nested messages are separate writers whose chunks are
 * spliced in by reference, so a large initializer's bytes are copied once
 * (into the final buffer) however deep they sit.
 */
export class ProtoWriter {
  private readonly parts: Uint8Array[] = [];
  private scratch = new Uint8Array(256);
  private pos = 0;
  /** Total encoded length so far, in bytes. */
  private totalBytes = 0;

  get length(): number {
    return this.totalBytes;
  }

  private ensure(extra: number): void {
    if (this.pos + extra <= this.scratch.length) return;
    this.flush();
    if (extra > this.scratch.length) this.scratch = new Uint8Array(Math.max(extra, this.scratch.length * 2));
  }

  private flush(): void {
    if (this.pos === 0) return;
    this.parts.push(this.scratch.slice(0, this.pos));
    this.pos = 0;
  }

  private byte(b: number): void {
    this.scratch[this.pos++] = b;
    this.totalBytes++;
  }

  /** Unsigned varint of a non-negative safe integer, or a negative int64 as its 64-bit two's complement. */
  varint(value: number): void {
    if (!Number.isSafeInteger(value)) throw new AppError(ErrorCode.GRAPH, `protobuf varint: expected a safe integer, got ${value}`);
    this.ensure(10);
    if (value < 0) {
      let v = BigInt.asUintN(64, BigInt(value));
      while (v >= 0x80n) {
        this.byte(Number(v & 0x7fn) | 0x80);
        v >>= 7n;
      }
      this.byte(Number(v));
      return;
    }
    let v = value;
    while (v >= 0x80) {
      this.byte((v % 0x80) | 0x80);
      v = Math.floor(v / 0x80);
    }
    this.byte(v);
  }

  tag(field: number, wireType: WireType): void {
    this.varint(field * 8 + wireType);
  }

  int(field: number, value: number): void {
    this.tag(field, WireType.VARINT);
    this.varint(value);
  }

  float(field: number, value: number): void {
    this.tag(field, WireType.I32);
    this.ensure(4);
    new DataView(this.scratch.buffer).setFloat32(this.pos, value, true);
    this.pos += 4;
    this.totalBytes += 4;
  }

  bytes(field: number, value: Uint8Array): void {
    this.tag(field, WireType.LEN);
    this.varint(value.byteLength);
    if (value.byteLength >= BIG_CHUNK_BYTES) {
      this.flush();
      this.parts.push(value);
    } else {
      this.ensure(value.byteLength);
      this.scratch.set(value, this.pos);
      this.pos += value.byteLength;
    }
    this.totalBytes += value.byteLength;
  }

  string(field: number, value: string): void {
    this.bytes(field, new TextEncoder().encode(value));
  }

  message(field: number, sub: ProtoWriter): void {
    this.tag(field, WireType.LEN);
    this.varint(sub.length);
    this.flush();
    sub.flush();
    appendAll(this.parts, sub.parts);
    this.totalBytes += sub.length;
  }

  finish(): Uint8Array {
    this.flush();
    if (this.parts.length === 1 && this.parts[0]?.byteLength === this.totalBytes) return this.parts[0];
    const out = new Uint8Array(this.totalBytes);
    let offset = 0;
    for (const p of this.parts) {
      out.set(p, offset);
      offset += p.byteLength;
    }
    return out;
  }
}

/** Sequential decoder over one message's bytes. */
export class ProtoReader {
  private pos: number;
  private readonly view: DataView;

  constructor(
    private readonly buf: Uint8Array,
    start = 0,
    private readonly end = buf.byteLength,
  ) {
    this.pos = start;
    this.view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  }

  /** The next field's number and wire type, or null at the end of the message. */
  next(): { field: number; wireType: number } | null {
    if (this.pos >= this.end) return null;
    const key = this.varint();
    return { field: Math.floor(key / 8), wireType: key % 8 };
  }

  private fail(what: string): never {
    throw new AppError(ErrorCode.GRAPH, `protobuf decode: ${what} at byte ${this.pos}`);
  }

  /** A varint read as a signed int64 (two's complement), returned as a number. */
  varint(): number {
    const start = this.pos;
    let result = 0;
    let scale = 1;
    // Fast path: up to 7 bytes (49 bits) stays exact in a double.
    for (let i = 0; i < 7; i++) {
      if (this.pos >= this.end) this.fail('truncated varint');
      const b = this.buf[this.pos++] ?? 0;
      result += (b & 0x7f) * scale;
      if ((b & 0x80) === 0) return result;
      scale *= 128;
    }
    // Long varints (negative int64s take 10 bytes) decode through BigInt.
    this.pos = start;
    let v = 0n;
    for (let i = 0; i < 10; i++) {
      if (this.pos >= this.end) this.fail('truncated varint');
      const b = this.buf[this.pos++] ?? 0;
      v |= BigInt(b & 0x7f) << BigInt(7 * i);
      if ((b & 0x80) === 0) return Number(BigInt.asIntN(64, v));
    }
    return this.fail('varint longer than 10 bytes');
  }

  float(): number {
    if (this.pos + 4 > this.end) this.fail('truncated fixed32');
    const v = this.view.getFloat32(this.pos, true);
    this.pos += 4;
    return v;
  }

  double(): number {
    if (this.pos + 8 > this.end) this.fail('truncated fixed64');
    const v = this.view.getFloat64(this.pos, true);
    this.pos += 8;
    return v;
  }

  /** A length-delimited field's bytes, as a view into the input. */
  bytes(): Uint8Array {
    const n = this.varint();
    if (n < 0 || this.pos + n > this.end) this.fail('length past end of message');
    const out = this.buf.subarray(this.pos, this.pos + n);
    this.pos += n;
    return out;
  }

  string(): string {
    return new TextDecoder().decode(this.bytes());
  }

  sub(): ProtoReader {
    const bytes = this.bytes();
    return new ProtoReader(bytes);
  }

  /** Repeated varint field, packed (LEN) or not (one VARINT per element). */
  varints(wireType: number): number[] {
    if (wireType !== WireType.LEN) return [this.varint()];
    const r = this.sub();
    const out: number[] = [];
    while (!r.atEnd()) out.push(r.varint());
    return out;
  }

  floats(wireType: number): number[] {
    if (wireType !== WireType.LEN) return [this.float()];
    const r = this.sub();
    const out: number[] = [];
    while (!r.atEnd()) out.push(r.float());
    return out;
  }

  doubles(wireType: number): number[] {
    if (wireType !== WireType.LEN) return [this.double()];
    const r = this.sub();
    const out: number[] = [];
    while (!r.atEnd()) out.push(r.double());
    return out;
  }

  atEnd(): boolean {
    return this.pos >= this.end;
  }

  skip(wireType: number): void {
    if (wireType === WireType.VARINT) this.varint();
    else if (wireType === WireType.I64) this.pos += 8;
    else if (wireType === WireType.LEN) this.bytes();
    else if (wireType === WireType.I32) this.pos += 4;
    else this.fail(`unsupported wire type ${wireType}`);
  }
}
