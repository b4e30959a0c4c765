import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { drawQuestionIds } from '@sqlenv/agents';
import type { BatchStats, RolloutRunSpec } from '@sqlenv/protocol';
import { evaluateIntoRunDir, RUN_CHECKPOINT_DIR, RunRecorder, writeResumePoint, writeRunReport, writeRunSpec, type SavedEval } from '@sqlenv/runs';
import { AppError, ErrorCode, PhaseProgress, type Logger, type ProgressMode } from '@sqlenv/shared';
import type { SqlEnvRuntime } from '@sqlenv/sql-env';
import { runCoordinator, type RunSummary } from './coordinator.ts';
import { policyUpdaterFor, type ClosablePolicyUpdater } from './grpo-updater.ts';
import { RolloutMetrics } from './metrics.ts';
import type { ModelExecution } from './resources/execution.ts';
import { createRunResolver, RuntimeCache, scheduledQuestions, type RuntimeOptions } from './resources/run-resources.ts';
import { checkAdapterShareWritable } from './resources/adapter-share.ts';
import type { RemoteInferenceOptions } from './resources/remote-model-resources.ts';
import { RolloutWorker, type ResolveRun } from './rollout-worker.ts';
import { startStatusServer, type StatusServer } from './status-server.ts';
import { runTrainer } from './trainer.ts';
import { renderProgress } from './training-progress.ts';
import { ABORTED, abortReasonOf, emptySummary, keptEvaluation, phaseSpec, RunInterrupted, savedWeights, unlessAborted, type ResumeFrom } from './training-resume.ts';
import { BullmqTransport, type BullmqTransportConfigInput } from './transport/bullmq-transport.ts';
import { InProcessTransport } from './transport/in-process-transport.ts';
import type { Transport } from './transport/transport.ts';

/**
 * A whole training run in one process, as `sqlenv train` (and `sqlenv learn`) run it: the
 * coordinator, a worker and the trainer on one transport (in-process, or Redis so that workers
 * elsewhere help), the run directory written as it goes, and a held-out evaluation before and after.
 * Read top-down: open the resources, evaluate 'before', train, evaluate 'after', write the report.
 */

/** The held-out evaluation: the same questions and seeds before training and after it. */
export interface HeldOutSettings {
  /** Questions drawn from the split (or all of them). */
  episodes: number | 'all';
  split: 'train' | 'dev';
  /** Episode i resets (and samples) with seed + i, the same before and after. */
  seed: number;
  /** Plays of every question, each with its own seed. */
  seeds: number;
  /** Sampling temperature of the evaluation (0: greedy). */
  temperature: number;
  /** Play it in lockstep on its own engine (the engine's `deterministic` option): the same run gives the same evaluations. Default false. */
  deterministic?: boolean;
}

export interface TrainingRunOptions {
  /** The run directory (metrics.jsonl, evals/, adapters/, report.html). */
  runDir: string;
  /** Save the adapter of every N-th version too (0 = only the final one). */
  saveEvery: number;
  /** Committed weights kept: the newest K versions. */
  keepWeights: number;
  /** Episodes in flight at once, in the local worker and in each held-out evaluation. */
  concurrency: number;
  /** Redis instead of the in-process transport: workers anywhere (`sqlenv worker --redis URL`) may play the run's episodes. */
  redis?: BullmqTransportConfigInput;
  /** Play episodes in this process too (false needs `redis`: workers elsewhere play them all). */
  localWorker: boolean;
  /** None: no held-out evaluation. */
  heldOut?: HeldOutSettings;
  /** Serve /metrics and /status on this port (127.0.0.1) while the run lasts. */
  metricsPort?: number;
  /** The model directory of a model run (`spec.model`). */
  modelDir?: string;
  /** Where this process's model sessions run. */
  execution?: ModelExecution;
  /** Sample on inference servers instead of an in-process engine (the held-out evaluations too). */
  remote?: RemoteInferenceOptions;
  /** Publish each version's adapter as `<dir>/<run>/v<N>/` for inference servers (`--adapter-share`). */
  adapterShare?: string;
  /** How the SQL runtime is opened (cache directory, executor pool, missing databases). */
  runtime: RuntimeOptions;
  logger: Logger;
  /**
   * Stops the run keeping its work: the update in flight is finished and committed, the last
   * version's adapter and the learner's state are saved (checkpoint/), the report is written, and
   * runTraining rejects with RunInterrupted. The abort reason (a signal name) is recorded.
   */
  signal?: AbortSignal;
  /** Continue an interrupted run from its checkpoint (readResumePoint): the 'before' evaluation kept, the GRPO phase from `version`. */
  resume?: ResumeFrom;
  /** Progress on a stream (bar or lines); 'off' or absent: none. */
  progress?: { stream: NodeJS.WritableStream & { columns?: number }; mode: ProgressMode };
}

export interface TrainingRunResult {
  summary: RunSummary;
  /** Every trained batch, in order. */
  batches: BatchStats[];
  /** The report.html written at the end. */
  report: string;
  /** Versions whose adapter was saved under adapters/. */
  adapters: number[];
  /** The held-out evaluations ('before', 'after'), when asked for. */
  evals: SavedEval[];
  /** Versions whose learner numbers held NaN or ∞. */
  nonFiniteVersions: readonly number[];
}

/** Run `spec` to the end: everything it opens is closed again, whether it succeeds or throws. */
export async function runTraining(spec: RolloutRunSpec, options: TrainingRunOptions): Promise<TrainingRunResult> {
  const { logger, runDir } = options;
  const progress: NonNullable<TrainingRunOptions['progress']> = options.progress ?? { stream: new Writable({ write: (_chunk, _encoding, done) => done() }), mode: 'off' };
  if (options.redis === undefined && !options.localWorker) throw new AppError(ErrorCode.VALIDATION, '--local-worker false needs --redis URL (workers elsewhere play the episodes)');
  if (options.remote !== undefined && spec.policy === 'model' && options.adapterShare === undefined) {
    throw new AppError(ErrorCode.VALIDATION, 'training with remote inference (--inference-url) needs --adapter-share DIR: the servers load each version from there');
  }
  if (options.remote !== undefined && options.heldOut?.deterministic === true) {
    throw new AppError(ErrorCode.VALIDATION, 'deterministic held-out evaluations need the in-process engine: inference servers (--inference-url) batch requests as they come');
  }
  if (options.adapterShare !== undefined) checkAdapterShareWritable(options.adapterShare);
  let transport: Transport | undefined;
  let runtimes: RuntimeCache | undefined;
  let worker: RolloutWorker | undefined;
  let server: StatusServer | undefined;
  let progressTimer: NodeJS.Timeout | undefined;
  let updater: ClosablePolicyUpdater | undefined;
  let heldOut: HeldOutEvaluation | undefined;
  try {
    // 1. The transport, the dataset and the run directory.
    transport = options.redis === undefined ? new InProcessTransport() : new BullmqTransport(options.redis, { logger });
    const activeTransport = transport;
    if (progress.mode !== 'off') progress.stream.write(`Loading dataset ${spec.dataset}…\n`);
    runtimes = new RuntimeCache(options.runtime);
    const runtime = await runtimes.get(spec.dataset);
    const questions = scheduledQuestions(runtime.dataset, spec.split);
    const recorder = new RunRecorder({ dir: runDir, runId: spec.run_id, saveEvery: options.saveEvery, versionOffset: options.resume?.version ?? 0, ...(spec.model ? { baseModel: options.modelDir ?? spec.model.fingerprint } : {}), logger });
    writeRunSpec(runDir, spec);
    const resolverOptions = {
      ...(options.modelDir === undefined ? {} : { modelDir: options.modelDir }),
      maxBatchSize: options.concurrency,
      ...(options.execution === undefined ? {} : { execution: options.execution }),
      ...(options.remote === undefined ? {} : { remote: options.remote }),
      logger,
    };
    const resolveRun = createRunResolver(runtimes, resolverOptions);
    const { signal, resume } = options;
    // Stopped by the signal: keep what is committed, say where to continue, and reject with RunInterrupted.
    const interrupted = (episodesDone: number, parts: Readonly<Record<string, Uint8Array>>): never => {
      const version = recorder.lastVersion;
      recorder.finish();
      const reason = signal === undefined ? 'SIGINT' : abortReasonOf(signal);
      const checkpoint = writeResumePoint(runDir, { run_id: spec.run_id, version, episodes_done: episodesDone, reason }, parts);
      const report = writeRunReport(runDir);
      logger.warn({ version, episodesDone, reason }, 'run interrupted; its work is kept');
      throw new RunInterrupted({ version, reason, report, checkpoint, adapters: recorder.savedAdapterVersions });
    };
    const startDone = resume?.episodesDone ?? 0;
    const startParts = resume?.parts ?? {};

    // 2. The held-out evaluation before any update (a resumed run keeps the one it made).
    // Its own resources: a deterministic evaluation's engine plays in lockstep, the worker's does not.
    const evalResolver = options.heldOut?.deterministic === true ? createRunResolver(runtimes, { ...resolverOptions, deterministic: true }) : resolveRun;
    heldOut = options.heldOut === undefined ? undefined : new HeldOutEvaluation(spec, runtime, evalResolver, { ...options.heldOut, runDir, concurrency: options.concurrency }, progress);
    const evals: SavedEval[] = [];
    if (heldOut) {
      const kept = resume === undefined ? undefined : keptEvaluation(runDir, 'before', spec.run_id);
      const before = kept ?? (await unlessAborted(heldOut.run('before', 0, null), signal));
      if (before === ABORTED) return interrupted(startDone, startParts);
      evals.push(before);
    }

    // 3. Coordinator, worker and trainer on the transport (a resumed run: the episodes left, from its last version).
    const phase = phaseSpec(spec, runDir, resume);
    let summary: RunSummary;
    const batches: BatchStats[] = [];
    if (phase.episodes > 0) {
      await transport.registerRun(phase);
      // A resumed model run: the learner continues from the saved version with its optimizer state (a commit that keeps version 0).
      const optimizerParts = Object.entries(startParts);
      const startWeights = resume === undefined ? null : savedWeights(runDir, resume.version);
      if (optimizerParts.length > 0 && startWeights !== null) {
        const key = `${phase.run_id}/weights/v0-resumed-${randomBytes(4).toString('hex')}`;
        for (const [name, bytes] of optimizerParts) await transport.blobs.put(`${key}/${name}`, Buffer.from(bytes));
        await transport.blobs.put(key, startWeights);
        await transport.commit(phase.run_id, { expectedVersion: 0, newVersion: 0, weightsKey: key, trained: [], dropped: [], trainedSlots: [], batch: null });
      }
      const metrics = new RolloutMetrics();
      if (options.metricsPort !== undefined) {
        server = await startStatusServer({
          port: options.metricsPort,
          host: '127.0.0.1',
          registry: metrics.registry,
          status: async () => ({ app: 'train', run_id: phase.run_id, counters: await activeTransport.counters(phase.run_id) }),
          logger,
        });
      }
      if (options.localWorker) {
        worker = new RolloutWorker({ transport, resolveRun, concurrency: options.concurrency, runId: phase.run_id, workerId: options.redis === undefined ? 'embedded' : `train-${process.pid}`, discoveryMs: 200, logger, metrics });
        await worker.start();
      }
      const grpoProgress = new PhaseProgress('GRPO', progress.stream, progress.mode);
      // A model run learns (GRPO on the LoRA adapter); oracle and random runs exercise the loop with
      // the statistics-only updater.
      updater = await policyUpdaterFor(phase, options.modelDir, logger, options.execution);
      const trainer = runTrainer({ transport, runId: phase.run_id, updater, pollMs: 50, runWaitMs: 10_000, logger, metrics, retention: { keepLast: options.keepWeights, checkpointEvery: 0 }, onBatch: (b) => batches.push(b), onCommitted: recorder.onCommitted, ...(signal ? { signal } : {}), ...(options.adapterShare === undefined ? {} : { adapterShare: options.adapterShare }) });
      // Surface a trainer failure at once instead of waiting on a coordinator that can no longer finish.
      const trainerFailed = trainer.then(
        () => new Promise<never>(() => undefined),
        (error: unknown) => Promise.reject(error),
      );
      const columns = (): number => progress.stream.columns || 100;
      if (progress.mode !== 'off') {
        progressTimer = setInterval(() => {
          void activeTransport.counters(phase.run_id).then((c) => {
            grpoProgress.draw(renderProgress(phase, c, batches, grpoProgress.elapsedS, columns()), c.consumedEpisodes + c.failedGroups * phase.group_size, phase.episodes);
          });
        }, progress.mode === 'bar' ? 200 : 1000);
      }
      const coordinated = runCoordinator({ transport, spec: phase, questions, pollMs: 50, logger, metrics, ...(signal ? { signal } : {}) }).catch((error: unknown): typeof ABORTED => {
        if (signal?.aborted === true) return ABORTED;
        throw error;
      });
      const grpo = await Promise.race([coordinated, trainerFailed]);
      // Stopped: the trainer finishes and commits the update in flight, then stops too.
      await trainer;
      if (progressTimer) {
        clearInterval(progressTimer);
        progressTimer = undefined;
        grpoProgress.finish(renderProgress(phase, await transport.counters(phase.run_id), batches, grpoProgress.elapsedS, columns()));
      }
      if (grpo === ABORTED) {
        const c = await transport.counters(phase.run_id);
        return interrupted(startDone + (c.trainedGroups + c.droppedGroups + c.failedGroups) * spec.group_size, recorder.lastVersion > (resume?.version ?? 0) ? recorder.lastParts : startParts);
      }
      summary = { ...grpo, policy_version: recorder.lastVersion };
    } else {
      summary = emptySummary(spec, transport.kind, recorder.lastVersion);
    }
    await worker?.close();
    recorder.finish();

    // 4. The held-out evaluation of the final weights, and the report.
    if (heldOut) {
      const version = recorder.lastVersion;
      const after = await unlessAborted(heldOut.run('after', version, recorder.lastWeights ?? savedWeights(runDir, version)), signal);
      if (after === ABORTED) return interrupted(spec.episodes, {});
      evals.push(after);
    }
    rmSync(join(runDir, RUN_CHECKPOINT_DIR), { recursive: true, force: true });
    const report = writeRunReport(runDir);
    return { summary, batches, report, adapters: recorder.savedAdapterVersions, evals, nonFiniteVersions: recorder.nonFiniteVersions };
  } finally {
    if (progressTimer) clearInterval(progressTimer);
    await worker?.close();
    await updater?.close();
    await heldOut?.close();
    await server?.close();
    await transport?.close();
    await runtimes?.close();
  }
}

interface HeldOutOptions extends HeldOutSettings {
  runDir: string;
  concurrency: number;
}

/**
 * The run's held-out evaluation: the same questions and seeds before training and after it, with
 * the run's policy (greedy for a model) in its own resources, so it never competes with the worker's
 * episodes; the final weights are applied for the 'after' one.
 */
class HeldOutEvaluation {
  readonly #spec: RolloutRunSpec;
  readonly #runtime: SqlEnvRuntime;
  readonly #resolveRun: ResolveRun;
  readonly #options: HeldOutOptions;
  readonly #progress: { stream: NodeJS.WritableStream; mode: ProgressMode };
  #resources: ReturnType<ResolveRun> | undefined;

  constructor(spec: RolloutRunSpec, runtime: SqlEnvRuntime, resolveRun: ResolveRun, options: HeldOutOptions, progress: { stream: NodeJS.WritableStream; mode: ProgressMode }) {
    this.#spec = spec;
    this.#runtime = runtime;
    this.#resolveRun = resolveRun;
    this.#options = options;
    this.#progress = progress;
    const ids = runtime.dataset.questionsOf(options.split).map((q) => q.question_id);
    if (ids.length === 0) throw new AppError(ErrorCode.VALIDATION, `--eval-split ${options.split}: dataset ${spec.dataset} has no questions in that split`);
  }

  async run(name: string, version: number, weights: Buffer | null): Promise<SavedEval> {
    const evalSpec = this.#spec.model === undefined ? this.#spec : { ...this.#spec, model: { ...this.#spec.model, sampling: { ...this.#spec.model.sampling, temperature: this.#options.temperature } } };
    this.#resources ??= this.#resolveRun(evalSpec);
    const resources = await this.#resources;
    if (version > 0) await resources.applyWeights?.(weights, version);
    const drawn = drawQuestionIds(this.#runtime.dataset.questionsOf(this.#options.split).map((q) => q.question_id), this.#options.episodes, this.#options.seed);
    // Every question once per seed; episode i resets (and samples) with seed + i, the same before and after.
    const ids = Array.from({ length: this.#options.seeds }, () => drawn).flat();
    const progress = new PhaseProgress(`Evaluation ${name} (v${version}, ${this.#options.split})`, this.#progress.stream, this.#progress.mode);
    const { saved } = await evaluateIntoRunDir({
      runDir: this.#options.runDir,
      name,
      runId: this.#spec.run_id,
      version,
      policy: resources.policy,
      createEnvironment: () => this.#runtime.createEnvironment(),
      questionIds: ids,
      seed: this.#options.seed,
      concurrency: this.#options.concurrency,
      dataset: this.#spec.dataset,
      split: this.#options.split,
      onProgress: (done, total) => progress.update(done, total),
    });
    progress.finish();
    return saved;
  }

  async close(): Promise<void> {
    const resources = await this.#resources;
    await resources?.release?.();
  }
}
