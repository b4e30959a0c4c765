import { randomBytes } from 'node:crypto';
import { createWriteStream, existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { AppError, ErrorCode, PhaseProgress, signalExitCode, silentLogger } from '@sqlenv/shared';
import type { SftSummary } from '@sqlenv/grpo';
import type { SavedEval } from '@sqlenv/runs';
import { abortReasonOf, type ModelExecution } from '@sqlenv/rollout';
import { claimRunDir, LEARN_RESULT_FILE, pairedDifferenceOf, passAtKOf, readResumePoint, readSavedEvals, REPORT_FILE, RUN_SPEC_FILE, SFT_DATA_FILE, SFT_DIR, SFT_STEPS_FILE, sftOutputDir, successInterval, writeRunCommand, type RunDirClaim } from '@sqlenv/runs';
import { intFlag, MAX_EPISODES, parseFlags, positiveIntFlag, seedsFlag } from '../flags.ts';
import { UsageError } from '../cli-error.ts';
import { reportCommandError, type CommandIo } from '../io.ts';
import { DatasetFlags, datasetFlagOptions } from '../dataset-flags.ts';
import { writeSftData } from './sft-data.ts';
import { SftOptionsSchema, sftJobOptions } from './sft.ts';
import { trainCommandLine, trainRun, trainRunSpec, TrainOptionsSchema, type TrainOptionsInput } from './train.ts';
import { claimModeOf, resumedOptions, savedOptionsOf } from '../run-dir-flags.ts';
import { ExecutionFlags, executionFlagOptions, startExecution } from '../execution-flags.ts';
import { executionOptionsOf } from './execution-options.ts';
import { AdapterShareOptionsSchema, adapterShareOptionSpecs, InferenceOptionsSchema, inferenceOptionSpecs, type InferenceOptions } from './inference-options.ts';

/** The checkpoint `npm start` begins from: made by this project's `sqlenv sft --full` (models/README.md says how). */
export const DEFAULT_LEARN_MODEL = fileURLToPath(new URL('../../../../models/sqlenv-base', import.meta.url));

const number = z.coerce.number();

const LearnFlags = DatasetFlags.extend({
  model: z.string().min(1).default(DEFAULT_LEARN_MODEL),
  /** builtin-heldout: the built-in dataset (its train split for SFT and GRPO) with 212 held-out dev questions instead of 60. */
  dataset: z.string().min(1).default('builtin-heldout'),
  'run-dir': z.string().min(1).optional(),
  seed: intFlag.default(0),
  /** SFT warm start: full-parameter steps on the oracle's episodes of the train split (0 skips it). */
  'sft-steps': intFlag.default(30),
  'sft-lr': number.positive().default(1e-4),
  'sft-batch-size': positiveIntFlag.default(16),
  /** full: every weight (small models trained from scratch); lora: a LoRA adapter (r = --lora-rank) that GRPO continues (Hugging Face checkpoints). */
  'sft-mode': z.enum(['full', 'lora']).default('full'),
  /** GRPO: episodes, groups and sampling. */
  episodes: positiveIntFlag.max(MAX_EPISODES, 'a bound no run needs: split larger work into several runs').default(8192),
  'group-size': positiveIntFlag.default(8),
  'groups-per-batch': positiveIntFlag.default(4),
  /** Policy versions an episode may lag the trainer (0: on-policy, rollouts wait for each update; 1: the next batch is sampled while the update runs). */
  'max-staleness': intFlag.default(1),
  temperature: number.positive().default(1),
  lr: number.positive().default(5e-4),
  'lora-rank': positiveIntFlag.default(16),
  'max-new-tokens': positiveIntFlag.default(96),
  concurrency: positiveIntFlag.default(32),
  /** Passed to sqlenv train as they are (its defaults when absent): group advantage, λ of negative advantages, the run's reward settings (JSON). */
  advantage: z.enum(['grpo', 'dr_grpo']).optional(),
  'negative-weight': number.min(0).max(1).optional(),
  reward: z.string().min(1).optional(),
  /** Cap C of the truncated importance weight (sqlenv train's --tis-cap; 0 = no weight). */
  'tis-cap': number.min(0).optional(),
  /** The learner's settings as JSON (sqlenv train's --learner: PPO epochs, loss normalisation, KL β, optimizer); --lr on top. */
  learner: z.string().min(1).optional(),
  /** Held-out evaluation: every dev question this many times (each its own seed), at the GRPO temperature. */
  'eval-seeds': seedsFlag.default(8),
  /** Dev questions per evaluation (all, or N drawn by the eval seed). */
  'eval-questions': z.union([z.literal('all'), positiveIntFlag]).default('all'),
  redis: z.string().min(1).optional(),
  'local-worker': z.enum(['true', 'false']).default('true'),
  /** Continue the interrupted run in --run-dir with its saved settings (SFT redone if it had not finished, the 'before' evaluation kept, GRPO from its last version). */
  resume: z.boolean().default(false),
  /** Replace what --run-dir holds (the new directory is made before the old one is removed). */
  force: z.boolean().default(false),
  /** The GRPO phase's run id (set by learn itself; kept in command.json so a resume continues it). */
  'grpo-run-id': z.string().min(1).optional(),
  /** The held-out evaluations in lockstep (sqlenv train's --deterministic). */
  deterministic: z.boolean().default(false),
})
  .extend(ExecutionFlags.shape)
  .extend(InferenceOptionsSchema.shape)
  .extend(AdapterShareOptionsSchema.shape);

/** The last stdout line of `sqlenv learn` (and of `npm start`). */
export interface LearnResult {
  success_before: number;
  success_after: number;
  ci95_before: [number, number];
  ci95_after: [number, number];
  sft_success: number;
  /** After GRPO above before-GRPO with the two 95 % intervals apart (a far stricter test than `improved`). */
  improved_beyond_ci: boolean;
  /** success_after − success_before over the episode pairs (same question, same seed). */
  diff: number;
  /** 95 % interval of diff from a paired bootstrap over questions (each question's seeds kept together). */
  diff_ci95: [number, number];
  /** diff_ci95's lower end above 0: GRPO raised held-out success with 95 % confidence. */
  improved: boolean;
  /** pass@k before and after ("1", "4", "8"; null where a question had fewer than k seeds). */
  pass_at_k_before: Record<string, number | null>;
  pass_at_k_after: Record<string, number | null>;
  episodes_per_eval: number;
  minutes: number;
  report: string;
}

/**
 * `sqlenv learn` (what `npm start` runs): the whole learning recipe on one machine, in phases with a
 * progress bar each — SFT warm start of the model on the oracle's episodes of the train split, held-out
 * evaluation of the SFT policy (every dev question × --eval-seeds, sampled at the GRPO temperature),
 * GRPO on the train split (embedded, or over Redis with --redis), the same evaluation again, the run
 * report. The last stdout line is one JSON object (LearnResult). Exit 1 when the run produced NaNs or
 * the policy collapsed (sqlenv train's checks).
 */
export async function learnCommand(argv: readonly string[], io: CommandIo): Promise<number> {
  const { flags, given } = parseFlags(
    argv,
    {
      model: { type: 'string' },
      dataset: { type: 'string' },
      'run-dir': { type: 'string' },
      seed: { type: 'string' },
      'sft-steps': { type: 'string' },
      'sft-lr': { type: 'string' },
      'sft-batch-size': { type: 'string' },
      'sft-mode': { type: 'string' },
      episodes: { type: 'string' },
      'group-size': { type: 'string' },
      'groups-per-batch': { type: 'string' },
      'max-staleness': { type: 'string' },
      temperature: { type: 'string' },
      lr: { type: 'string' },
      'lora-rank': { type: 'string' },
      'max-new-tokens': { type: 'string' },
      concurrency: { type: 'string' },
      advantage: { type: 'string' },
      'negative-weight': { type: 'string' },
      reward: { type: 'string' },
      'tis-cap': { type: 'string' },
      learner: { type: 'string' },
      'eval-seeds': { type: 'string' },
      'eval-questions': { type: 'string' },
      redis: { type: 'string' },
      'local-worker': { type: 'string' },
      resume: { type: 'boolean' },
      force: { type: 'boolean' },
      deterministic: { type: 'boolean' },
      ...datasetFlagOptions,
      ...executionFlagOptions,
      ...inferenceOptionSpecs,
      ...adapterShareOptionSpecs,
    },
    LearnFlags,
    { env: io.env ?? {} },
  );
  claimModeOf(flags);
  if (given.includes('grpo-run-id')) throw new UsageError('--grpo-run-id is set by sqlenv learn itself');
  if (!flags.resume) return learn(flags, io);
  if (flags['run-dir'] === undefined) throw new UsageError('--resume needs --run-dir: the run directory of the run to continue');
  const claim = claimRunDir(flags['run-dir'], { mode: 'resume', command: 'learn', label: '--run-dir' });
  try {
    const saved = claim.resumed as NonNullable<RunDirClaim['resumed']>;
    const flagOf = (key: string): string => `--${key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`;
    const options = LearnFlags.parse(resumedOptions(saved, flags, given, LEARN_RESUME_MAY_CHANGE, flagOf));
    return await learn({ ...options, 'run-dir': flags['run-dir'], resume: true }, io, claim);
  } finally {
    claim.release();
  }
}

/** What a resumed learn may run with differently (where and how it runs, as train's RESUME_MAY_CHANGE), by learn's keys. */
const LEARN_RESUME_MAY_CHANGE: ReadonlySet<string> = new Set(['execution-provider', 'device-id', 'threads', 'cpu-arena', 'redis', 'local-worker', 'concurrency', 'inferenceUrl', 'inferenceApiKey', 'inferenceConcurrency', 'adapterShare']);

export type LearnOptions = z.infer<typeof LearnFlags>;

/**
 * The learning run of `sqlenv learn`, composed of its phases: SFT warm start (runSftJob), then a
 * training run with held-out evaluations before and after GRPO (train → runTraining), then the
 * numbers of the two evaluations. Returns the exit code.
 */
export async function learn(input: LearnOptions, io: CommandIo, resumedClaim?: RunDirClaim): Promise<number> {
  const logger = io.logger ?? silentLogger;
  // The GRPO phase's run id is the run's from the start, so that a resume continues the same run.
  const flags: LearnOptions = { ...input, 'grpo-run-id': input['grpo-run-id'] ?? `train-${randomBytes(3).toString('hex')}` };
  // Resolved once (flag, else SQLENV_SKIP_MISSING_DBS) and handed to every phase that loads the dataset.
  const skipMissing = flags['skip-missing-dbs'] === true;
  if (!existsSync(join(flags.model, 'config.json'))) {
    throw new UsageError(`--model ${flags.model}: no config.json there (the default checkpoint ships in the repository's models/ directory)`);
  }
  if (flags.inferenceUrl !== undefined && flags['sft-steps'] > 0 && flags['sft-mode'] === 'full') {
    throw new UsageError('--inference-url with a full-parameter SFT warm start: the servers would sample the base model, not the SFT checkpoint; use --sft-mode lora (GRPO continues the adapter, published as v0) or --sft-steps 0');
  }
  // Every phase (SFT, the evaluations, GRPO's engine and learner) runs its sessions with these settings.
  const execution = await startExecution(flags, io.env ?? {}, logger, true);
  const started = performance.now();
  const runDir = resolve(flags['run-dir'] ?? join('runs', `learn-${new Date().toISOString().replace(/[:.]/g, '-')}`));
  // The GRPO phase's settings (whole groups, --reward, --learner) are checked now, not after the SFT steps.
  await trainRunSpec(TrainOptionsSchema.parse(grpoOptions(flags, flags.model, undefined, runDir, false, execution, skipMissing)));
  // The run directory is this run's before anything is written: another run's (or one in use) is refused here.
  const claim = resumedClaim ?? claimRunDir(runDir, { mode: claimModeOf(flags), command: 'learn', label: '--run-dir' });
  try {
    if (resumedClaim === undefined) writeRunCommand(runDir, 'learn', flags['grpo-run-id'] as string, savedOptionsOf({ ...flags, 'run-dir': runDir }));
    return await learnPhases(flags, io, { runDir, claim, execution, skipMissing, started, resumed: resumedClaim !== undefined });
  } finally {
    if (resumedClaim === undefined) claim.release();
  }
}

interface LearnRun {
  runDir: string;
  /** learn's claim of the run directory: the GRPO phase runs in it without claiming it again. */
  claim: RunDirClaim;
  execution: ModelExecution;
  skipMissing: boolean;
  started: number;
  /** Continuing an interrupted run: finished phases are kept. */
  resumed: boolean;
}

/** The phases of a learning run in its claimed run directory; returns the exit code. */
async function learnPhases(flags: LearnOptions, io: CommandIo, run: LearnRun): Promise<number> {
  const { runDir, execution, skipMissing, started } = run;
  const logger = io.logger ?? silentLogger;
  const grpoRunId = flags['grpo-run-id'] as string;
  const tty = (io.stderr as { isTTY?: boolean }).isTTY === true;
  const say = (text: string): void => void io.stderr.write(`${text}\n`);
  say(`sqlenv learn: ${flags.model} on ${flags.dataset}; run directory ${runDir}${run.resumed ? ' (resumed)' : ''}`);

  // Phase 1: SFT warm start on the oracle's episodes of the train split (kept by a resume once it finished).
  let policyModel = flags.model;
  let adapter: string | undefined;
  if (flags['sft-steps'] > 0) {
    const lora = flags['sft-mode'] === 'lora';
    const sftOut = sftOutputDir(runDir, flags['sft-mode']);
    if (run.resumed && existsSync(sftOut)) say(`SFT: kept from the run (${sftOut})`);
    else {
      // An SFT phase that did not finish left no output (it is written whole at the end): it starts again.
      rmSync(join(runDir, SFT_DIR), { recursive: true, force: true });
      const stopped = await sftPhase(flags, io, { runDir, sftOut, lora, execution, skipMissing, tty, say });
      if (stopped !== undefined) return stopped;
    }
    if (lora) adapter = sftOut;
    else policyModel = sftOut;
  }

  // Phases 2–4: evaluation before, GRPO, evaluation after (a training run with held-out evaluations).
  const trainOptions = grpoOptions(flags, policyModel, adapter, runDir, tty, execution, skipMissing);
  const trainIo: CommandIo = { stdout: io.stderr, stderr: io.stderr, env: {}, logger, ...(io.signal === undefined ? {} : { signal: io.signal }) };
  let code: number;
  let evals: SavedEval[];
  // A resumed run whose GRPO phase had started continues it from its checkpoint; one that finished is only summed up.
  const grpoStarted = run.resumed && existsSync(join(runDir, RUN_SPEC_FILE));
  if (grpoStarted && readResumePoint(runDir) === undefined && existsSync(join(runDir, LEARN_RESULT_FILE))) {
    say('sqlenv learn: the run had finished; its result is computed again from its evaluations');
    code = 0;
    evals = readSavedEvals(runDir, { runId: grpoRunId });
  } else {
    say(`GRPO: ${trainCommandLine(trainOptions)}${grpoStarted ? ' (resumed from its checkpoint)' : ''}`);
    const outcome = await trainRun(TrainOptionsSchema.parse(trainOptions), trainIo, { claim: run.claim, resume: grpoStarted, command: 'learn' }).catch((error: unknown) => ({ code: reportCommandError(trainIo, 'train', error), runId: grpoRunId, evals: [] as SavedEval[] }));
    code = outcome.code;
    evals = outcome.evals;
    if (io.signal?.aborted === true) return code;
  }
  // Only this run's evaluations make its result (each carries the run id).
  const before = evals.find((e) => e.name === 'before' && e.run_id === grpoRunId);
  const after = evals.find((e) => e.name === 'after' && e.run_id === grpoRunId);
  if (before === undefined || after === undefined) {
    say(`sqlenv learn: the run ended without both evaluations (sqlenv train exited ${code})`);
    return code === 0 ? 1 : code;
  }
  return writeLearnResult(io, runDir, before, after, started, code);
}

interface SftPhaseContext {
  runDir: string;
  sftOut: string;
  lora: boolean;
  execution: ModelExecution;
  skipMissing: boolean;
  tty: boolean;
  say: (text: string) => void;
}

/** The SFT warm start; returns an exit code when a signal stopped it (nothing of it is kept), else undefined. */
async function sftPhase(flags: LearnOptions, io: CommandIo, context: SftPhaseContext): Promise<number | undefined> {
  const { runDir, sftOut, lora, execution, skipMissing, tty, say } = context;
  const logger = io.logger ?? silentLogger;
  const data = join(runDir, SFT_DIR, SFT_DATA_FILE);
  mkdirSync(join(runDir, SFT_DIR), { recursive: true });
  const written = await writeSftData(
    { dataset: flags.dataset, 'skip-missing-dbs': skipMissing, split: 'train', model: flags.model, out: data, episodes: 'all', seed: flags.seed, format: 'messages', thinking: false },
    io,
  );
  say(`SFT data: ${written.lines} oracle episodes of the train split (${written.skipped.length} skipped), ${written.meanTokens.toFixed(0)} tokens each on average`);
  const { runSftJob } = await import('@sqlenv/grpo');
  const steps = createWriteStream(join(runDir, SFT_DIR, SFT_STEPS_FILE));
  const progress = new PhaseProgress('SFT', io.stderr, tty ? 'bar' : 'lines');
  let summary: SftSummary;
  try {
    summary = await runSftJob(
      sftJobOptions(SftOptionsSchema.parse({
        model: flags.model,
        data,
        steps: flags['sft-steps'],
        out: sftOut,
        full: !lora,
        ...(lora ? { loraRank: flags['lora-rank'], loraAlpha: 2 * flags['lora-rank'] } : {}),
        learningRate: flags['sft-lr'],
        batchSize: flags['sft-batch-size'],
        schedule: 'cosine',
        warmupSteps: Math.min(10, Math.floor(flags['sft-steps'] / 10)),
        shuffle: true,
        seed: flags.seed,
        ...executionOptionsOf(execution),
      })),
      { stdout: steps },
      { logger, onStep: (step) => progress.update(step.step, flags['sft-steps'], ` steps · loss ${step.loss.toFixed(3)}`), ...(io.signal === undefined ? {} : { signal: io.signal }) },
    );
  } catch (error) {
    if (io.signal?.aborted !== true || !(error instanceof AppError) || error.code !== ErrorCode.ABORTED) throw error;
    const reason = abortReasonOf(io.signal);
    say(`sqlenv learn: stopped by ${reason} during the SFT warm start; nothing is trained yet (a resume starts SFT again)\ncontinue it with: sqlenv learn --run-dir ${runDir} --resume`);
    return signalExitCode(reason);
  } finally {
    await new Promise<void>((done) => steps.end(done));
  }
  progress.finish();
  say(`SFT: ${summary.steps} steps, loss ${summary.firstLoss.toFixed(3)} → ${summary.lastLoss.toFixed(3)}; ${lora ? 'adapter' : 'model'} in ${sftOut}`);
  return undefined;
}

/** The run's numbers from its two evaluations: result.json and the last stdout line. Returns `code`. */
function writeLearnResult(io: CommandIo, runDir: string, before: SavedEval, after: SavedEval, started: number, code: number): number {
  const b = successInterval(before);
  const a = successInterval(after);
  const paired = pairedDifferenceOf(before, after);
  if (paired === null) {
    io.stderr.write('sqlenv learn: the two evaluations share no (question, seed) episode, so they cannot be compared\n');
    return code === 0 ? 1 : code;
  }
  const passAtK = (saved: SavedEval): Record<string, number | null> => Object.fromEntries(Object.entries(passAtKOf(saved)).map(([k, v]) => [k, v === null ? null : round(v)]));
  const result: LearnResult = {
    success_before: round(b.rate),
    success_after: round(a.rate),
    ci95_before: [round(b.ci95[0]), round(b.ci95[1])],
    ci95_after: [round(a.ci95[0]), round(a.ci95[1])],
    sft_success: round(b.rate),
    improved_beyond_ci: a.ci95[0] > b.ci95[1],
    diff: round(paired.diff),
    diff_ci95: [round(paired.ci[0]), round(paired.ci[1])],
    improved: paired.ci[0] > 0,
    pass_at_k_before: passAtK(before),
    pass_at_k_after: passAtK(after),
    episodes_per_eval: a.episodes,
    minutes: round((performance.now() - started) / 60_000, 2),
    report: join(runDir, REPORT_FILE),
  };
  writeFileSync(join(runDir, LEARN_RESULT_FILE), `${JSON.stringify(result, null, 2)}\n`);
  io.stdout.write(`${JSON.stringify(result)}\n`);
  return code;
}

/** The GRPO phase as `sqlenv train` options (printed as its command line, so the phase can be run alone). */
function grpoOptions(flags: LearnOptions, model: string, adapter: string | undefined, runDir: string, tty: boolean, execution: ModelExecution, skipMissing: boolean): TrainOptionsInput {
  return {
    dataset: flags.dataset,
    policy: 'model',
    modelDir: model,
    ...(adapter === undefined ? {} : { adapter }),
    temperature: flags.temperature,
    maxNewTokens: flags['max-new-tokens'],
    episodes: flags.episodes,
    group_size: flags['group-size'],
    groups_per_batch: flags['groups-per-batch'],
    max_staleness: flags['max-staleness'],
    concurrency: flags.concurrency,
    seed: flags.seed,
    learningRate: flags.lr,
    loraRank: flags['lora-rank'],
    loraAlpha: 2 * flags['lora-rank'],
    ...(flags.advantage === undefined ? {} : { advantage: flags.advantage }),
    ...(flags['negative-weight'] === undefined ? {} : { negative_advantage_weight: flags['negative-weight'] }),
    ...(flags.reward === undefined ? {} : { reward: flags.reward }),
    ...(flags.learner === undefined ? {} : { learner: flags.learner }),
    ...(flags['tis-cap'] === undefined ? {} : { tisCap: flags['tis-cap'] }),
    runDir,
    run_id: flags['grpo-run-id'],
    evalEpisodes: flags['eval-questions'],
    evalSeeds: flags['eval-seeds'],
    evalTemperature: flags.temperature,
    evalSeed: 1_000_000 + flags.seed,
    ...(flags.deterministic ? { deterministic: true } : {}),
    progress: tty ? 'bar' : 'lines',
    ...executionOptionsOf(execution),
    ...(flags.redis === undefined ? {} : { redisUrl: flags.redis, localWorker: flags['local-worker'] }),
    ...(skipMissing ? { skipMissingDbs: true } : {}),
    ...remoteInferenceFlags(flags),
  };
}

/** The remote-sampling flags, handed to the GRPO phase as they are. */
function remoteInferenceFlags(flags: LearnOptions): InferenceOptions {
  const keys = ['inferenceUrl', 'inferenceApiKey', 'inferenceModel', 'inferenceConcurrency', 'adapterShare', 'adapterShareAs'] as const;
  return Object.fromEntries(keys.filter((k) => flags[k] !== undefined).map((k) => [k, flags[k]]));
}

function round(x: number, digits = 4): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}
