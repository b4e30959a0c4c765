import { appendFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ADAPTER_CONFIG_FILE, ADAPTER_WEIGHTS_FILE, decodeSafetensors, loraConfigFromPeft, peftAdapterConfig } from '@sqlenv/model';
import { AppError, ErrorCode, formatZodIssues, silentLogger, writeDirAtomic, type Logger } from '@sqlenv/shared';
import type { BatchStats, Trajectory } from '@sqlenv/protocol';
import { adapterVersionDir, RUN_METRICS_FILE, RUN_SPEC_FILE } from './run-files.ts';
import { RunMetricsLineSchema, runMetricsLine, type RunMetricsLine, type UpdateStats } from './run-metrics.ts';

/**
 * What the trainer hands over after each commit (the trainer's `onCommitted` argument has this
 * shape): the version, its batch and where the time went.
 */
export interface RecordedVersion {
  version: number;
  stats: BatchStats;
  /** trajectories[g][i]: episode i of group g of the batch. */
  trajectories: readonly (readonly Trajectory[])[];
  /** The weights blob published for this version. */
  weights: Buffer;
  /** Parts stored with the weights (the optimizer state of a GRPO learner), kept for a resume checkpoint. */
  parts?: Readonly<Record<string, Uint8Array>> | undefined;
  updateStats: UpdateStats | null;
  phaseSeconds: Readonly<Record<string, number>>;
}

/** Every metrics line of a run directory, by version (a version written twice keeps its last line). */
export function readRunMetrics(runDir: string): RunMetricsLine[] {
  const path = join(runDir, RUN_METRICS_FILE);
  if (!existsSync(path)) return [];
  const byVersion = new Map<number, RunMetricsLine>();
  readFileSync(path, 'utf8')
    .split('\n')
    .forEach((text, i) => {
      if (text.trim() === '') return;
      let json: unknown;
      try {
        json = JSON.parse(text);
      } catch {
        // A run killed mid-write leaves at most its last line cut short.
        throw new AppError(ErrorCode.VALIDATION, `${path}:${i + 1}: not valid JSON`);
      }
      const parsed = RunMetricsLineSchema.safeParse(json);
      if (!parsed.success) throw new AppError(ErrorCode.VALIDATION, `${path}:${i + 1}: ${formatZodIssues(parsed.error)}`);
      byVersion.set(parsed.data.version, parsed.data);
    });
  return [...byVersion.values()].sort((a, b) => a.version - b.version);
}

/**
 * Write a version's weights blob as `adapters/v<N>/` in PEFT's layout (adapter_model.safetensors
 * + adapter_config.json, the LoRA settings read from the blob's safetensors metadata). Returns the
 * directory, or null when the blob holds no adapter (a JSON blob: the statistics-only updater's).
 */
export function saveAdapterVersion(runDir: string, version: number, blob: Uint8Array, options: { baseModel?: string } = {}): string | null {
  return writeAdapterBlobDir(adapterVersionDir(runDir, version), version, blob, options);
}

/**
 * Write a version's weights blob as the PEFT adapter directory `dir` (see saveAdapterVersion),
 * built beside it and renamed into place. Returns `dir`, or null for a blob that holds no adapter.
 */
export function writeAdapterBlobDir(dir: string, version: number, blob: Uint8Array, options: { baseModel?: string } = {}): string | null {
  // The statistics-only updater's blob is a JSON document too.
  if (isJsonBlob(blob)) return null;
  const { metadata } = decodeSafetensors(blob, `weights of version ${version}`);
  const lora = loraConfigFromPeft(
    { peft_type: 'LORA', r: Number(metadata['lora_r']), lora_alpha: Number(metadata['lora_alpha']), target_modules: (metadata['lora_target_modules'] ?? '').split(',').filter((t) => t !== '') },
    `weights of version ${version} (safetensors metadata)`,
  );
  const adapterConfig = `${JSON.stringify(peftAdapterConfig(lora, options.baseModel === undefined ? {} : { baseModel: options.baseModel }), null, 2)}\n`;
  // One version's adapter is the same bytes whoever writes it (a restarted trainer saves it again): replaced whole.
  writeDirAtomic(
    dir,
    (temp) => {
      // The blob is already the PEFT safetensors file (encodeAdapter): written as it is, dtype kept.
      writeFileSync(join(temp, ADAPTER_WEIGHTS_FILE), blob);
      writeFileSync(join(temp, ADAPTER_CONFIG_FILE), adapterConfig);
    },
    { force: true },
  );
  return dir;
}

/** A JSON document rather than safetensors (a toy or statistics learner's "weights"). */
function isJsonBlob(blob: Uint8Array): boolean {
  if (blob[0] !== 0x7b) return false;
  try {
    JSON.parse(Buffer.from(blob).toString('utf8'));
    return true;
  } catch {
    return false;
  }
}

export interface RunRecorderOptions {
  dir: string;
  /** Also save the adapter of every N-th version (0 = only the final one). */
  saveEvery: number;
  /** Recorded as base_model_name_or_path in adapter_config.json. */
  baseModel?: string;
  /** Refuse a directory whose run.json names another run (two runs' lines would mix). */
  runId?: string;
  /** A resumed GRPO phase: its version v is version versionOffset + v of the run (metrics lines, adapters). */
  versionOffset?: number;
  logger?: Logger;
}

/**
 * The trainer's side of the run directory: pass `onCommitted` to runTrainer; it appends one
 * metrics line per version and saves the chosen adapters; `finish()` saves the final one. A
 * trainer restarted on the same directory appends (its clock continues from the last line).
 */
export class RunRecorder {
  readonly dir: string;
  readonly #options: RunRecorderOptions;
  readonly #logger: Logger;
  readonly #startedAt: number;
  #lastAt: number;
  #last: { version: number; weights: Buffer; parts: Readonly<Record<string, Uint8Array>> } | undefined;
  #savedVersions = new Set<number>();
  #nonFinite: number[] = [];

  constructor(options: RunRecorderOptions) {
    this.dir = options.dir;
    this.#options = options;
    this.#logger = (options.logger ?? silentLogger).child({ component: 'run-recorder', dir: options.dir });
    const specPath = join(options.dir, RUN_SPEC_FILE);
    if (options.runId !== undefined && existsSync(specPath)) {
      const previous = (JSON.parse(readFileSync(specPath, 'utf8')) as { run_id?: unknown }).run_id;
      if (previous !== options.runId) throw new AppError(ErrorCode.VALIDATION, `run directory ${options.dir} holds run ${String(previous)}, not ${options.runId}: choose another run directory or delete it`);
    }
    mkdirSync(options.dir, { recursive: true });
    const previousMs = readRunMetrics(options.dir).at(-1)?.time ?? 0;
    this.#lastAt = performance.now();
    this.#startedAt = this.#lastAt - previousMs;
  }

  /** The weights blob of the last version recorded (null before the first). */
  get lastWeights(): Buffer | null {
    return this.#last?.weights ?? null;
  }

  /** Versions whose learner numbers held NaN or ∞ (a run should fail loudly on any). */
  get nonFiniteVersions(): readonly number[] {
    return this.#nonFinite;
  }

  get savedAdapterVersions(): number[] {
    return [...this.#savedVersions].sort((a, b) => a - b);
  }

  /** The run's version of the last version recorded (the offset when none was). */
  get lastVersion(): number {
    return this.#last?.version ?? (this.#options.versionOffset ?? 0);
  }

  /** The optimizer state and other parts stored with the last version recorded. */
  get lastParts(): Readonly<Record<string, Uint8Array>> {
    return this.#last?.parts ?? {};
  }

  readonly onCommitted = (committed: RecordedVersion): void => {
    const now = performance.now();
    const offset = this.#options.versionOffset ?? 0;
    const relative = runMetricsLine({
      stats: committed.stats,
      trajectories: committed.trajectories,
      updateStats: committed.updateStats,
      phaseSeconds: { ...committed.phaseSeconds },
      timeMs: now - this.#startedAt,
      intervalSeconds: (now - this.#lastAt) / 1000,
    });
    const line = { ...relative, version: relative.version + offset };
    this.#lastAt = now;
    appendFileSync(join(this.dir, RUN_METRICS_FILE), `${JSON.stringify(line)}\n`);
    if (line.non_finite.length > 0) this.#nonFinite.push(line.version);
    if (line.non_finite.length > 0) this.#logger.error({ version: line.version, fields: line.non_finite }, 'the learner reported non-finite numbers');
    this.#last = { version: line.version, weights: committed.weights, parts: committed.parts ?? {} };
    const every = this.#options.saveEvery;
    if (every > 0 && line.version % every === 0) this.#saveAdapter(line.version, committed.weights);
  };

  /** Save the last version's adapter (when it is one and not saved yet); returns its directory or null. */
  finish(): string | null {
    if (this.#last === undefined) return null;
    return this.#saveAdapter(this.#last.version, this.#last.weights);
  }

  #saveAdapter(version: number, weights: Buffer): string | null {
    const dir = adapterVersionDir(this.dir, version);
    if (this.#savedVersions.has(version)) return dir;
    const saved = saveAdapterVersion(this.dir, version, weights, this.#options.baseModel === undefined ? {} : { baseModel: this.#options.baseModel });
    if (saved !== null) {
      this.#savedVersions.add(version);
      this.#logger.info({ version, dir: saved }, 'adapter saved');
    }
    return saved;
  }
}
