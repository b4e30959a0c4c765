import { closeSync, existsSync, openSync, readFileSync, readSync, readdirSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { AppError, ErrorCode, formatZodIssues } from '@sqlenv/shared';
import { bf16BitsToF32, f16BitsToF32, f32ToBf16Bits, f32ToF16Bits } from './half-float.ts';

/**
 * safetensors (https://github.com/huggingface/safetensors#format): an 8-byte
 * little-endian header length N, N bytes of JSON
 * `{name: {dtype, shape, data_offsets: [begin, end]}, __metadata__?}`, then
 * the raw little-endian data, offsets relative to 8 + N. Sharded checkpoints
 * add `model.safetensors.index.json` with `weight_map: {name: file}`.
 *
 * Tensors are read one at a time with positioned reads into their own
 * buffers, so a checkpoint is never held twice in memory while converting.
 */
export const StoredDtype = { F32: 'F32', F16: 'F16', BF16: 'BF16' } as const;
export type StoredDtype = (typeof StoredDtype)[keyof typeof StoredDtype];
const BYTES_PER_ELEMENT: Record<StoredDtype, number> = { F32: 4, F16: 2, BF16: 2 };

const tensorEntrySchema = z.object({
  dtype: z.string(),
  shape: z.array(z.number().int().nonnegative()),
  data_offsets: z.tuple([z.number().int().nonnegative(), z.number().int().nonnegative()]),
});

export interface TensorInfo {
  name: string;
  dtype: StoredDtype;
  shape: number[];
  /** Absolute byte offset of the data in the file. */
  offsetBytes: number;
  sizeBytes: number;
  file: string;
}

/** A float32 tensor in memory (row-major). */
export interface F32Tensor {
  shape: number[];
  data: Float32Array;
}

export function numel(shape: readonly number[]): number {
  return shape.reduce((a, b) => a * b, 1);
}

/** The largest finite float32 value: a weight scaled past it becomes Inf in the graph. */
export const F32_MAX = 3.4028234663852886e38;

/**
 * Refuse NaN or ±Inf among `values` (and, with `scale`, any value whose product with it overflows
 * float32), naming the tensor and its file: a non-finite weight gives NaN logits, generation of
 * one token forever and 0 % success with exit 0, instead of an error.
 */
export function checkFinite(values: Float32Array, tensor: string, file: string, scale = 1): void {
  const limit = F32_MAX / Math.abs(scale);
  for (let i = 0; i < values.length; i++) {
    const v = values[i] as number;
    // One comparison covers NaN (false against everything) and ±Inf.
    if (!(Math.abs(v) <= limit)) {
      const what = Number.isNaN(v) ? 'NaN' : !Number.isFinite(v) ? String(v) : `${v} (× scale ${scale} overflows float32)`;
      throw new AppError(ErrorCode.MODEL, `${file}: tensor ${tensor} holds a non-finite value ${what} at index ${i}`, { details: { tensor, file, index: i } });
    }
  }
}

/** Parse one file's header. */
export function readSafetensorsHeader(file: string): { tensors: TensorInfo[]; metadata: Record<string, string> } {
  const fd = openOrThrow(file);
  try {
    const lengthBytes = Buffer.alloc(8);
    if (readSync(fd, lengthBytes, 0, 8, 0) !== 8) throw new AppError(ErrorCode.MODEL, `${file}: truncated safetensors header`);
    const headerSize = checkedHeaderSize(lengthBytes, file);
    const headerBytes = Buffer.alloc(headerSize);
    if (readSync(fd, headerBytes, 0, headerSize, 8) !== headerSize) throw new AppError(ErrorCode.MODEL, `${file}: truncated header`);
    return parseHeader(headerBytes, file);
  } finally {
    closeSync(fd);
  }
}

function checkedHeaderSize(lengthBytes: Buffer, label: string): number {
  const headerSize = Number(lengthBytes.readBigUInt64LE(0));
  if (headerSize > 100 * 1024 * 1024) throw new AppError(ErrorCode.MODEL, `${label}: implausible header size ${headerSize}`);
  return headerSize;
}

/** The JSON header of a file (`label` names it in errors and becomes each tensor's `file`). */
function parseHeader(headerBytes: Buffer, label: string): { tensors: TensorInfo[]; metadata: Record<string, string> } {
  const headerSize = headerBytes.length;
  let json: Record<string, unknown>;
  try {
    json = JSON.parse(headerBytes.toString('utf8')) as Record<string, unknown>;
  } catch (cause) {
    throw new AppError(ErrorCode.MODEL, `${label}: header is not JSON`, { cause });
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json)) throw new AppError(ErrorCode.MODEL, `${label}: header is not a JSON object`);
  const tensors: TensorInfo[] = [];
  let metadata: Record<string, string> = {};
  for (const [name, value] of Object.entries(json)) {
    if (name === '__metadata__') {
      metadata = (value ?? {}) as Record<string, string>;
      continue;
    }
    const entry = tensorEntrySchema.safeParse(value);
    if (!entry.success) throw new AppError(ErrorCode.MODEL, `${label}: tensor ${name}: ${formatZodIssues(entry.error)}`);
    const { dtype, shape, data_offsets: [begin, end] } = entry.data;
    if (!(dtype in BYTES_PER_ELEMENT)) {
      throw new AppError(ErrorCode.MODEL, `${label}: tensor ${name} has unsupported dtype ${dtype} (expected F32, F16 or BF16)`);
    }
    const storedDtype = dtype as StoredDtype;
    if (end - begin !== numel(shape) * BYTES_PER_ELEMENT[storedDtype]) {
      throw new AppError(ErrorCode.MODEL, `${label}: tensor ${name} byte range does not match its shape [${shape.join(', ')}]`);
    }
    tensors.push({ name, dtype: storedDtype, shape, offsetBytes: 8 + headerSize + begin, sizeBytes: end - begin, file: label });
  }
  checkNoOverlap(tensors, label);
  return { tensors, metadata };
}

/**
 * The format forbids two tensors sharing bytes (a writer of one would change the other, and a
 * checkpoint could pass one buffer off as several weights); empty tensors take no bytes.
 */
function checkNoOverlap(tensors: readonly TensorInfo[], label: string): void {
  const sorted = tensors.filter((t) => t.sizeBytes > 0).sort((a, b) => a.offsetBytes - b.offsetBytes);
  for (let i = 1; i < sorted.length; i++) {
    const previous = sorted[i - 1] as TensorInfo;
    const current = sorted[i] as TensorInfo;
    if (current.offsetBytes < previous.offsetBytes + previous.sizeBytes) {
      throw new AppError(ErrorCode.MODEL, `${label}: tensors ${previous.name} and ${current.name} overlap in data_offsets (the safetensors format forbids shared bytes)`);
    }
  }
}

/**
 * Every tensor of a safetensors file held in memory (an adapter blob), as float32, and the
 * header's `__metadata__`. `label` names the source in errors.
 */
export function decodeSafetensors(bytes: Uint8Array, label = 'safetensors bytes'): { tensors: Map<string, F32Tensor>; metadata: Record<string, string> } {
  const buffer = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (buffer.length < 8) throw new AppError(ErrorCode.MODEL, `${label}: truncated safetensors header`);
  const headerSize = checkedHeaderSize(buffer.subarray(0, 8), label);
  if (buffer.length < 8 + headerSize) throw new AppError(ErrorCode.MODEL, `${label}: truncated header`);
  const { tensors, metadata } = parseHeader(buffer.subarray(8, 8 + headerSize), label);
  const out = new Map<string, F32Tensor>();
  for (const info of tensors) {
    if (info.offsetBytes + info.sizeBytes > buffer.length) throw new AppError(ErrorCode.MODEL, `${label}: truncated tensor data for ${info.name}`);
    out.set(info.name, { shape: info.shape, data: toF32(buffer.subarray(info.offsetBytes, info.offsetBytes + info.sizeBytes), info.dtype, numel(info.shape)) });
  }
  return { tensors: out, metadata };
}

/** Raw little-endian bytes of one tensor → float32 (bf16 and f16 exact). */
function toF32(raw: Uint8Array, dtype: StoredDtype, n: number): Float32Array {
  if (dtype === 'F32') {
    const out = new Float32Array(n);
    new Uint8Array(out.buffer).set(raw);
    return out;
  }
  const bits = new Uint16Array(n);
  new Uint8Array(bits.buffer).set(raw);
  const out = new Float32Array(n);
  const convert = dtype === 'BF16' ? bf16BitsToF32 : f16BitsToF32;
  for (let i = 0; i < n; i++) out[i] = convert(bits[i] as number);
  return out;
}

/** Read one tensor as float32 (bf16 exact, f16 exact). */
export function readTensorF32(info: TensorInfo): Float32Array {
  const fd = openOrThrow(info.file);
  try {
    const raw = Buffer.allocUnsafe(info.sizeBytes);
    readFully(fd, raw, info.offsetBytes, info.file);
    return toF32(raw, info.dtype, numel(info.shape));
  } finally {
    closeSync(fd);
  }
}

function readFully(fd: number, target: Buffer, position: number, file: string): void {
  // readSync reads at most ~2 GiB at once; loop so huge embeddings work too.
  let done = 0;
  while (done < target.length) {
    const n = readSync(fd, target, done, Math.min(target.length - done, 1 << 30), position + done);
    if (n === 0) throw new AppError(ErrorCode.MODEL, `${file}: truncated tensor data`);
    done += n;
  }
}

function openOrThrow(file: string): number {
  try {
    return openSync(file, 'r');
  } catch (cause) {
    throw new AppError(ErrorCode.MODEL, `cannot open ${file}`, { cause });
  }
}

/** Encode a float32 tensor's values in a stored dtype (little-endian bytes). */
export function encodeTensor(data: Float32Array, dtype: StoredDtype): Uint8Array {
  if (dtype === 'F32') return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  const convert = dtype === 'BF16' ? f32ToBf16Bits : f32ToF16Bits;
  const bits = new Uint16Array(data.length);
  for (let i = 0; i < data.length; i++) bits[i] = convert(data[i] as number);
  return new Uint8Array(bits.buffer);
}

export interface TensorToWrite {
  name: string;
  shape: number[];
  /** The values, or a function producing them when written (so a big random checkpoint is never all in memory). */
  data: Float32Array | (() => Float32Array);
}

function materialise(t: TensorToWrite): Float32Array {
  const data = typeof t.data === 'function' ? t.data() : t.data;
  if (data.length !== numel(t.shape)) throw new AppError(ErrorCode.MODEL, `tensor ${t.name}: data length does not match shape`);
  return data;
}

/** The length prefix and padded JSON header of a file holding `tensors` in `dtype`. */
function encodeHeader(tensors: readonly { name: string; shape: number[] }[], dtype: StoredDtype, metadata: Record<string, string>): Buffer {
  const header: Record<string, unknown> = { __metadata__: { format: 'pt', ...metadata } };
  let offset = 0;
  for (const t of tensors) {
    const size = numel(t.shape) * BYTES_PER_ELEMENT[dtype];
    header[t.name] = { dtype, shape: t.shape, data_offsets: [offset, offset + size] };
    offset += size;
  }
  // The reference writer pads the header with spaces to 8-byte alignment.
  let headerText = JSON.stringify(header);
  headerText += ' '.repeat((8 - (Buffer.byteLength(headerText) % 8)) % 8);
  const headerBytes = Buffer.from(headerText, 'utf8');
  const length = Buffer.alloc(8);
  length.writeBigUInt64LE(BigInt(headerBytes.length));
  return Buffer.concat([length, headerBytes]);
}

/** Write one safetensors file; tensors are converted to `dtype` on the way out. */
export function writeSafetensorsFile(file: string, tensors: readonly TensorToWrite[], dtype: StoredDtype, metadata: Record<string, string> = {}): void {
  const fd = openSync(file, 'w');
  try {
    writeSync(fd, encodeHeader(tensors, dtype, metadata));
    for (const t of tensors) writeAll(fd, encodeTensor(materialise(t), dtype));
  } finally {
    closeSync(fd);
  }
}

/** A whole safetensors file in memory (small tensor sets: adapters, optimizer state). */
export function encodeSafetensors(tensors: readonly TensorToWrite[], dtype: StoredDtype, metadata: Record<string, string> = {}): Buffer {
  return Buffer.concat([encodeHeader(tensors, dtype, metadata), ...tensors.map((t) => encodeTensor(materialise(t), dtype))]);
}

const INDEX_FILE = 'model.safetensors.index.json';
const indexSchema = z.object({ metadata: z.record(z.string(), z.unknown()).optional(), weight_map: z.record(z.string(), z.string()) });

/**
 * Write a checkpoint's tensors into `dir`: one `model.safetensors`, or shards
 * `model-0000i-of-0000n.safetensors` of at most `maxShardSizeBytes` each plus
 * the index, as `save_pretrained` names them.
 */
export function writeSafetensorsCheckpoint(
  dir: string,
  tensors: readonly TensorToWrite[],
  options: { dtype?: StoredDtype; maxShardSizeBytes?: number } = {},
): string[] {
  const dtype = options.dtype ?? 'F32';
  const maxShard = options.maxShardSizeBytes ?? Number.POSITIVE_INFINITY;
  const shards: TensorToWrite[][] = [[]];
  let current = 0;
  for (const t of tensors) {
    const size = numel(t.shape) * BYTES_PER_ELEMENT[dtype];
    const last = shards.at(-1) as TensorToWrite[];
    if (last.length > 0 && current + size > maxShard) {
      shards.push([t]);
      current = size;
    } else {
      last.push(t);
      current += size;
    }
  }
  if (shards.length === 1) {
    writeSafetensorsFile(join(dir, 'model.safetensors'), shards[0] as TensorToWrite[], dtype);
    return ['model.safetensors'];
  }
  const pad = (i: number): string => String(i).padStart(5, '0');
  const names = shards.map((_, i) => `model-${pad(i + 1)}-of-${pad(shards.length)}.safetensors`);
  const weightMap: Record<string, string> = {};
  let totalSize = 0;
  shards.forEach((shard, i) => {
    writeSafetensorsFile(join(dir, names[i] as string), shard, dtype);
    for (const t of shard) {
      weightMap[t.name] = names[i] as string;
      totalSize += numel(t.shape) * BYTES_PER_ELEMENT[dtype];
    }
  });
  const index = { metadata: { total_size: totalSize }, weight_map: weightMap };
  writeFileText(join(dir, INDEX_FILE), `${JSON.stringify(index, null, 2)}\n`);
  return [...names, INDEX_FILE];
}

function writeAll(fd: number, bytes: Uint8Array): void {
  // writeSync may write less than asked for large buffers.
  let done = 0;
  while (done < bytes.length) done += writeSync(fd, bytes, done, Math.min(bytes.length - done, 1 << 30));
}

function writeFileText(file: string, text: string): void {
  const fd = openSync(file, 'w');
  try {
    writeSync(fd, text);
  } finally {
    closeSync(fd);
  }
}

/**
 * All tensors of a checkpoint directory, single-file or sharded. Only headers
 * are read up front; `readF32(name)` reads one tensor when asked.
 */
export class SafetensorsCheckpoint {
  readonly dir: string;
  readonly #tensors: Map<string, TensorInfo>;

  private constructor(dir: string, tensors: Map<string, TensorInfo>) {
    this.dir = dir;
    this.#tensors = tensors;
  }

  static open(dir: string): SafetensorsCheckpoint {
    if (!existsSync(dir)) throw new AppError(ErrorCode.MODEL, `model directory ${dir} does not exist`);
    const tensors = new Map<string, TensorInfo>();
    const indexPath = join(dir, INDEX_FILE);
    let files: string[];
    let weightMap: Record<string, string> | undefined;
    if (existsSync(indexPath)) {
      const parsed = indexSchema.safeParse(JSON.parse(readFileSync(indexPath, 'utf8')));
      if (!parsed.success) throw new AppError(ErrorCode.MODEL, `${indexPath}: ${formatZodIssues(parsed.error)}`);
      weightMap = parsed.data.weight_map;
      files = [...new Set(Object.values(weightMap))];
    } else {
      files = readdirSync(dir).filter((f) => f.endsWith('.safetensors')).sort();
    }
    if (files.length === 0) throw new AppError(ErrorCode.MODEL, `no .safetensors files in ${dir}`);
    for (const file of files) {
      for (const info of readSafetensorsHeader(join(dir, file)).tensors) {
        if (tensors.has(info.name)) throw new AppError(ErrorCode.MODEL, `tensor ${info.name} appears in two files of ${dir}`);
        tensors.set(info.name, info);
      }
    }
    if (weightMap !== undefined) {
      for (const [name, file] of Object.entries(weightMap)) {
        if (tensors.get(name)?.file !== join(dir, file)) {
          throw new AppError(ErrorCode.MODEL, `index lists tensor ${name} in ${file}, but that file does not hold it`);
        }
      }
    }
    return new SafetensorsCheckpoint(dir, tensors);
  }

  names(): string[] {
    return [...this.#tensors.keys()];
  }

  has(name: string): boolean {
    return this.#tensors.has(name);
  }

  info(name: string): TensorInfo {
    const info = this.#tensors.get(name);
    if (info === undefined) throw new AppError(ErrorCode.MODEL, `missing tensor ${name} in ${this.dir}`);
    return info;
  }

  /** Throw unless the header gives tensor `name` exactly `expectedShape` (no data is read). */
  checkShape(name: string, expectedShape: readonly number[]): void {
    const info = this.info(name);
    if (info.shape.length !== expectedShape.length || info.shape.some((d, i) => d !== expectedShape[i])) {
      throw new AppError(
        ErrorCode.MODEL,
        `tensor ${name} has shape [${info.shape.join(', ')}], expected [${expectedShape.join(', ')}]`,
      );
    }
  }

  /** One tensor as float32, after checking its shape when `expectedShape` is given. */
  readF32(name: string, expectedShape?: readonly number[]): F32Tensor {
    const info = this.info(name);
    if (expectedShape !== undefined) this.checkShape(name, expectedShape);
    return { shape: [...info.shape], data: readTensorF32(info) };
  }
}
