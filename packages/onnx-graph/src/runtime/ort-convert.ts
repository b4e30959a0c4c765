import * as ort from 'onnxruntime-node';
import { AppError, ErrorCode } from '@sqlenv/shared';
import { isDType } from '../dtype.ts';
import { formatShape } from '../shape.ts';
import { tensor, type TensorData } from '../tensor-data.ts';
import type { ValueSpec } from '../graph-core.ts';

export function toOrtTensor(t: TensorData): ort.Tensor {
  // Same dtype names as onnxruntime-common; float16 travels as Uint16Array bits, bool as Uint8Array.
  return new ort.Tensor(t.dtype, t.data, t.dims);
}

export function fromOrtTensor(name: string, t: ort.Tensor): TensorData {
  if (!isDType(t.type)) throw new AppError(ErrorCode.RUNTIME, `output '${name}': expected one of the supported dtypes, got ${t.type}`);
  return tensor(t.type, t.dims, t.data as Float32Array);
}

/**
 * The model argument for `InferenceSession.create`. The Node binding refuses model bytes on a
 * SharedArrayBuffer (external data there is fine), so those are copied into a plain buffer:
 * with the weights external, the model bytes are only the graph.
 */
export function ortModelArg(model: string | Uint8Array): string | Uint8Array {
  if (typeof model === 'string' || !(model.buffer instanceof SharedArrayBuffer)) return model;
  return new Uint8Array(model);
}

/** Check feeds against the model's declared inputs: names, dtypes, ranks and static dims. */
export function checkFeeds(feeds: Readonly<Record<string, TensorData>>, inputs: readonly ValueSpec[] | undefined): void {
  if (!inputs) return;
  for (const spec of inputs) {
    const t = feeds[spec.name];
    if (!t) throw new AppError(ErrorCode.VALIDATION, `run: missing input '${spec.name}' (expected ${spec.dtype}${formatShape(spec.shape)})`);
    if (t.dtype !== spec.dtype) throw new AppError(ErrorCode.VALIDATION, `run: input '${spec.name}': expected dtype ${spec.dtype}, got ${t.dtype}`);
    const badDim = t.dims.length !== spec.shape.length || spec.shape.some((d, i) => typeof d === 'number' && d !== t.dims[i]);
    if (badDim) throw new AppError(ErrorCode.VALIDATION, `run: input '${spec.name}': expected shape ${formatShape(spec.shape)}, got [${t.dims.join(', ')}]`);
  }
  const known = new Set(inputs.map((s) => s.name));
  for (const name of Object.keys(feeds)) {
    if (!known.has(name)) throw new AppError(ErrorCode.VALIDATION, `run: unknown input '${name}' (expected one of ${[...known].join(', ')})`);
  }
}

/** Run on an ORT session and convert outputs; shared by the direct and worker paths. */
export async function runOrt(session: ort.InferenceSession, feeds: Readonly<Record<string, TensorData>>, outputs: readonly string[] | undefined): Promise<Record<string, TensorData>> {
  const ortFeeds: Record<string, ort.Tensor> = {};
  for (const [name, t] of Object.entries(feeds)) ortFeeds[name] = toOrtTensor(t);
  let result: ort.InferenceSession.ReturnType;
  try {
    result = outputs ? await session.run(ortFeeds, [...outputs]) : await session.run(ortFeeds);
  } catch (error) {
    throw new AppError(ErrorCode.RUNTIME, `run failed: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
  }
  const out: Record<string, TensorData> = {};
  for (const [name, t] of Object.entries(result)) out[name] = fromOrtTensor(name, t);
  return out;
}

