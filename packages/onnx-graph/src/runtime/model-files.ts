import { mkdir, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { BuiltModel, ExternalDataFile, ValueSpec } from '../graph-core.ts';
import { encodeModel } from '../onnx-writer.ts';

/** Already encoded model bytes (plus external data and, optionally, the signature for feed checks). */
export interface ModelSource {
  bytes: Uint8Array;
  externalData?: readonly ExternalDataFile[];
  inputs?: readonly ValueSpec[];
  outputs?: readonly ValueSpec[];
}

/**
 * An .onnx file on disk, its external data files beside it (ONNX Runtime resolves their
 * locations relative to the model's directory). A worker session opens it itself, so the
 * model's bytes are never held by the creating thread.
 */
export interface ModelFile {
  path: string;
  inputs?: readonly ValueSpec[];
  outputs?: readonly ValueSpec[];
}

/** Encoded bytes and external data of a built model or byte source. */
export function modelBytes(model: BuiltModel | ModelSource): ModelSource {
  return 'proto' in model ? { bytes: encodeModel(model.proto), externalData: model.externalData, inputs: model.inputs, outputs: model.outputs } : model;
}

/** Write `bytes` to `filePath` and each external data file next to it. */
export async function writeModelFiles(filePath: string, bytes: Uint8Array, externalData: readonly ExternalDataFile[]): Promise<void> {
  const dir = dirname(filePath);
  await mkdir(dir, { recursive: true });
  await writeFile(filePath, bytes);
  for (const f of externalData) await writeFile(join(dir, f.path), f.data);
}

/**
 * Save a model as `filePath` plus its external data files in the same directory (give each
 * model its own directory: external file names come from initializer names). The result is a
 * `ModelFile` for `createSession`.
 */
export async function saveModel(model: BuiltModel | ModelSource, filePath: string): Promise<ModelFile> {
  const source = modelBytes(model);
  await writeModelFiles(filePath, source.bytes, source.externalData ?? []);
  return { path: filePath, ...(source.inputs ? { inputs: source.inputs } : {}), ...(source.outputs ? { outputs: source.outputs } : {}) };
}
