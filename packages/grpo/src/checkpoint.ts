import { decodeSafetensors, encodeAdapter, encodeSafetensors, type LoraConfig, type ModelConfig } from '@sqlenv/model';
import { AppError, ErrorCode } from '@sqlenv/shared';
import type { LearnerState } from './lora-learner.ts';
import type { OptimizerState } from './optimizer.ts';

/**
 * A learner's state as bytes: the adapter (PEFT safetensors, the blob workers load) and the
 * optimizer state (a second safetensors file: `exp_avg.<name>` / `exp_avg_sq.<name>` as PyTorch names
 * AdamW's moments, the step count in the metadata). Both together resume training exactly.
 */
export interface EncodedLearnerState {
  adapter: Buffer;
  optimizer: Buffer;
}

const STEP_KEY = 'optimizer_step';

export function encodeLearnerState(config: ModelConfig, lora: LoraConfig, state: LearnerState, metadata: Record<string, string> = {}): EncodedLearnerState {
  const tensors = [...state.optimizer.m.keys()].sort().flatMap((name) => {
    const m = state.optimizer.m.get(name) as Float32Array;
    const v = state.optimizer.v.get(name);
    if (v === undefined) throw new AppError(ErrorCode.INTERNAL, `optimizer state: ${name} has a first moment but no second`);
    return [
      { name: `exp_avg.${name}`, shape: [m.length], data: m },
      { name: `exp_avg_sq.${name}`, shape: [v.length], data: v },
    ];
  });
  return {
    adapter: encodeAdapter(config, { lora, weights: state.adapter }, { metadata }),
    optimizer: encodeSafetensors(tensors, 'F32', { [STEP_KEY]: String(state.optimizer.step) }),
  };
}

export function decodeOptimizerState(bytes: Uint8Array, label = 'optimizer state'): OptimizerState {
  const { tensors, metadata } = decodeSafetensors(bytes, label);
  const step = Number(metadata[STEP_KEY]);
  if (!Number.isInteger(step) || step < 0) throw new AppError(ErrorCode.VALIDATION, `${label}: no valid ${STEP_KEY} in its metadata`);
  const m = new Map<string, Float32Array>();
  const v = new Map<string, Float32Array>();
  for (const [name, t] of tensors) {
    if (name.startsWith('exp_avg_sq.')) v.set(name.slice('exp_avg_sq.'.length), t.data);
    else if (name.startsWith('exp_avg.')) m.set(name.slice('exp_avg.'.length), t.data);
    else throw new AppError(ErrorCode.VALIDATION, `${label}: unexpected tensor ${name}`);
  }
  return { step, m, v };
}

const SFT_RUN_KEY = 'sft_run';
const SFT_STEP_KEY = 'sft_step';

/** An SFT run's resumable state: the trained tensors, AdamW's moments and step, and what run wrote them. */
export interface SftCheckpoint {
  /** SFT steps taken (the next step is `step + 1`). */
  step: number;
  state: LearnerState;
  /** The options that fix the run's batches and updates (data fingerprint, batch size, seed, …), as written. */
  run: Record<string, string | number | boolean>;
}

/**
 * One safetensors file: `param.<name>` (every trained tensor: the adapter's factors, or every base
 * weight in full-parameter SFT), `exp_avg.<name>` / `exp_avg_sq.<name>` (AdamW's moments, as
 * PyTorch names them), the optimizer's and the run's step counts and the run's options in the metadata.
 */
export function encodeSftCheckpoint(checkpoint: SftCheckpoint): Buffer {
  const { state } = checkpoint;
  const params = [...state.adapter.keys()].sort().map((name) => ({ name: `param.${name}`, shape: [(state.adapter.get(name) as Float32Array).length], data: state.adapter.get(name) as Float32Array }));
  const moments = [...state.optimizer.m.keys()].sort().flatMap((name) => {
    const v = state.optimizer.v.get(name);
    if (v === undefined) throw new AppError(ErrorCode.INTERNAL, `optimizer state: ${name} has a first moment but no second`);
    return [
      { name: `exp_avg.${name}`, shape: [v.length], data: state.optimizer.m.get(name) as Float32Array },
      { name: `exp_avg_sq.${name}`, shape: [v.length], data: v },
    ];
  });
  return encodeSafetensors([...params, ...moments], 'F32', {
    [STEP_KEY]: String(state.optimizer.step),
    [SFT_STEP_KEY]: String(checkpoint.step),
    [SFT_RUN_KEY]: JSON.stringify(checkpoint.run),
  });
}

export function decodeSftCheckpoint(bytes: Uint8Array, label = 'SFT checkpoint'): SftCheckpoint {
  const { tensors, metadata } = decodeSafetensors(bytes, label);
  const step = Number(metadata[SFT_STEP_KEY]);
  const optimizerStep = Number(metadata[STEP_KEY]);
  if (!Number.isInteger(step) || step < 0) throw new AppError(ErrorCode.VALIDATION, `${label}: no valid ${SFT_STEP_KEY} in its metadata`);
  if (!Number.isInteger(optimizerStep) || optimizerStep < 0) throw new AppError(ErrorCode.VALIDATION, `${label}: no valid ${STEP_KEY} in its metadata`);
  let run: unknown;
  try {
    run = JSON.parse(metadata[SFT_RUN_KEY] ?? '');
  } catch {
    throw new AppError(ErrorCode.VALIDATION, `${label}: no valid ${SFT_RUN_KEY} in its metadata`);
  }
  if (typeof run !== 'object' || run === null || Array.isArray(run)) throw new AppError(ErrorCode.VALIDATION, `${label}: ${SFT_RUN_KEY} is not an object`);
  const adapter = new Map<string, Float32Array>();
  const m = new Map<string, Float32Array>();
  const v = new Map<string, Float32Array>();
  for (const [name, t] of tensors) {
    if (name.startsWith('param.')) adapter.set(name.slice('param.'.length), t.data);
    else if (name.startsWith('exp_avg_sq.')) v.set(name.slice('exp_avg_sq.'.length), t.data);
    else if (name.startsWith('exp_avg.')) m.set(name.slice('exp_avg.'.length), t.data);
    else throw new AppError(ErrorCode.VALIDATION, `${label}: unexpected tensor ${name}`);
  }
  return { step, state: { adapter, optimizer: { step: optimizerStep, m, v } }, run: run as SftCheckpoint['run'] };
}
