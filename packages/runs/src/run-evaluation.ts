import { evaluate, TranscriptCollector, type EvaluationEnvironment, type Policy } from '@sqlenv/agents';
import type { SplitName } from '@sqlenv/protocol';
import { savedEvalFromReport, writeSavedEval, type SavedEval } from './saved-eval.ts';

export interface RunEvaluationOptions {
  runDir: string;
  name: string;
  /** The training run it belongs to (recorded in the file as run_id). */
  runId?: string;
  /** The policy version being evaluated. */
  version: number;
  policy: Policy;
  createEnvironment: () => EvaluationEnvironment | Promise<EvaluationEnvironment>;
  questionIds: readonly string[];
  /** Episode i resets with seed + i. */
  seed: number;
  concurrency: number;
  dataset: string;
  split: SplitName | null;
  onProgress?: (done: number, total: number) => void;
}

/** Evaluate a policy on fixed questions and seeds and save the result as `evals/<name>.json`. */
export async function evaluateIntoRunDir(options: RunEvaluationOptions): Promise<{ saved: SavedEval; path: string }> {
  const transcripts = new TranscriptCollector();
  const report = await evaluate(options.createEnvironment, options.policy, {
    questionIds: options.questionIds,
    seed: options.seed,
    concurrency: options.concurrency,
    onTurn: transcripts.onTurn,
    policyVersion: options.version,
    ...(options.onProgress === undefined ? {} : { onProgress: (done: number, total: number) => options.onProgress?.(done, total) }),
  });
  const saved = savedEvalFromReport(report, transcripts, { name: options.name, version: options.version, dataset: options.dataset, split: options.split, seeds: [options.seed], ...(options.runId === undefined ? {} : { runId: options.runId }) });
  // The run's own evaluations (train's before/after): the run recorder already refuses another run's directory, and a resumed run re-takes them.
  return { saved, path: writeSavedEval(options.runDir, saved, { force: true }) };
}
