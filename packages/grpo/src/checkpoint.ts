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
