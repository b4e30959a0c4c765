import { join } from 'node:path';

/**
 * Every name inside a run directory (docs/run-directory.md): what a training run leaves behind
 * for people, and what a `--resume` reads back to continue an interrupted run.
 *
 *     run.json             the run spec
 *     metrics.jsonl        one line per policy version (RunMetricsLineSchema)
 *     evals/<name>.json    saved evaluations (SavedEvalSchema)
 *     adapters/v<N>/       PEFT adapters of chosen versions
 *     report.html          the report, rebuilt from the files above
 *     command.json         the command that made the run, its run id and options (what --resume reads)
 *     run.lock             the owner while a command runs in it (pid, host)
 *     checkpoint/          where an interrupted GRPO phase stopped (resume.json, the optimizer state)
 *
 * and, from `sqlenv learn`, its SFT warm start and its result:
 *
 *     sft/train.jsonl      the SFT data (the oracle's episodes of the train split)
 *     sft/steps.jsonl      one line per SFT step
 *     sft/model/ or sft/adapter/   what SFT wrote (full fine-tuning, or a LoRA adapter)
 *     result.json          the learning run's numbers (its last stdout line)
 */
export const RUN_SPEC_FILE = 'run.json';
export const RUN_METRICS_FILE = 'metrics.jsonl';
export const EVALS_DIR = 'evals';
export const ADAPTERS_DIR = 'adapters';
export const REPORT_FILE = 'report.html';
export const RUN_COMMAND_FILE = 'command.json';
export const RUN_LOCK_FILE = 'run.lock';
export const RUN_CHECKPOINT_DIR = 'checkpoint';

/** `adapters/v<N>`: where the adapter of policy version N is saved. */
export function adapterVersionDir(runDir: string, version: number): string {
  return join(runDir, ADAPTERS_DIR, `v${version}`);
}

/** `evals/<name>.json`: where a saved evaluation named `name` lives. */
export function savedEvalPath(runDir: string, name: string): string {
  return join(runDir, EVALS_DIR, `${name}.json`);
}

/** `sqlenv learn`'s SFT warm start: its data, its step log and its output. */
export const SFT_DIR = 'sft';
export const SFT_DATA_FILE = 'train.jsonl';
export const SFT_STEPS_FILE = 'steps.jsonl';
/** `sqlenv learn`'s result (its last stdout line, pretty-printed). */
export const LEARN_RESULT_FILE = 'result.json';

/** `sft/model` (full fine-tuning) or `sft/adapter` (LoRA): where `sqlenv learn`'s SFT writes. */
export function sftOutputDir(runDir: string, mode: 'full' | 'lora'): string {
  return join(runDir, SFT_DIR, mode === 'lora' ? 'adapter' : 'model');
}
