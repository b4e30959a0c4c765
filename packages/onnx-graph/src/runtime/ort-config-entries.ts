import { z } from 'zod';
import { AppError, ErrorCode } from '@sqlenv/shared';

/**
 * ONNX Runtime session config entries (`AddSessionConfigEntry`, keys from
 * onnxruntime_session_options_config_keys.h). ORT itself accepts any key and
 * silently ignores ones it does not know, so a typo would change nothing
 * without a word: only keys listed here are accepted, each with its values.
 */
const flag = z.enum(['0', '1']);

export const OrtConfigEntriesSchema = z.strictObject({
  /** '1': keep weights as given instead of adding a pre-packed copy per MatMul/Gemm (less memory, slower kernels). */
  'session.disable_prepacking': flag,
  'session.set_denormal_as_zero': flag,
  'session.use_env_allocators': flag,
  'session.use_device_allocator_for_initializers': flag,
  'session.disable_cpu_ep_fallback': flag,
  'session.strict_shape_type_inference': flag,
  'session.use_deterministic_compute': flag,
  'session.disable_aot_function_inlining': flag,
  'session.intra_op.allow_spinning': flag,
  'session.inter_op.allow_spinning': flag,
  'optimization.enable_gelu_approximation': flag,
  /** Comma-separated optimizer names, e.g. 'ConstantFolding,MatMulAddFusion'. */
  'optimization.disable_specified_optimizers': z.string().regex(/^[A-Za-z0-9_]+(,[A-Za-z0-9_]+)*$/, 'expected comma-separated optimizer names'),
  /** Per extra intra-op thread, ';'-separated processor lists: '1,2;3-4' (ORT checks the count against the threads). */
  'session.intra_op_thread_affinities': z.string().regex(/^\d+(-\d+)?(,\d+(-\d+)?)*(;\d+(-\d+)?(,\d+(-\d+)?)*)*$/, "expected ';'-separated processor lists like '1,2;3-4'"),
  'session.dynamic_block_base': z.string().regex(/^[1-9]\d*$/, 'expected a positive integer as a string'),
}).partial();

export type OrtConfigEntries = z.infer<typeof OrtConfigEntriesSchema>;
export const ORT_CONFIG_KEYS = Object.keys(OrtConfigEntriesSchema.shape) as readonly (keyof OrtConfigEntries)[];

/** Validate config entries; the error names the key, what was expected and what was given. */
export function parseOrtConfigEntries(value: unknown): OrtConfigEntries {
  const parsed = OrtConfigEntriesSchema.safeParse(value);
  if (parsed.success) return parsed.data;
  const problems = parsed.error.issues.map((issue) => {
    if (issue.code === 'unrecognized_keys') return `unknown key(s) ${issue.keys.map((k) => `'${k}'`).join(', ')} (expected one of ${ORT_CONFIG_KEYS.join(', ')})`;
    const key = issue.path.join('.');
    const got = key === '' ? value : (value as Record<string, unknown>)[key];
    return `${key === '' ? '(root)' : `'${key}'`}: ${issue.message}, got ${JSON.stringify(got)}`;
  });
  throw new AppError(ErrorCode.VALIDATION, `session config 'sessionConfig': ${problems.join('; ')}`, { details: { field: 'sessionConfig' } });
}
