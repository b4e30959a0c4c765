import type { Worker } from 'node:worker_threads';
import { join } from 'node:path';
import { AppError, ErrorCode, formatZodIssues, minOf, readMemoryLimit, silentLogger, startRpcWorker, WorkerRpc, type Logger } from '@sqlenv/shared';
import type { EngineReply, EngineRequest, EngineWorkerSetup } from './engine-worker.ts';
import { engineOptionsSchema, type EngineOptions, type InferenceEngineOptions } from './engine-options.ts';
import { readModelConfig } from '../io/weights.ts';
import { planEngineMemory } from '../memory/engine-memory-plan.ts';
import type { TurnLane, TurnRequest, TurnResult } from './executor.ts';
import type { LoraWeights } from '../graphs/lora.ts';
import { emptySchedulerStats, type SchedulerStats } from './scheduler-stats.ts';

export { engineOptionsSchema, experimentalEngineOptionsSchema, publicEngineOptionsSchema, turnSchedulingDefaults, type EngineOptions, type ExperimentalEngineOptions, type InferenceEngineOptions, type PublicEngineOptions } from './engine-options.ts';
export type { TurnRequest, TurnResult } from './executor.ts';

/** Largest model (float32 weight bytes) the CPU default runs as several replicas: each holds its own copy. */
export const REPLICA_MAX_WEIGHT_BYTES = 256 * 2 ** 20;

/** Fewest rows per replica the CPU default aims at: a decode step's cost per row falls steeply up to about 8–16 rows. */
export const REPLICA_MIN_ROWS = 16;

/**
 * How a process's threads become engine threads, each replica getting an equal share (at least one):
 * `replicas` when given; otherwise a CPU model of at most REPLICA_MAX_WEIGHT_BYTES runs as
 * min(threads, ⌈maxBatchSize / REPLICA_MIN_ROWS⌉) replicas, a larger one (or another provider) as one
 * replica with all the threads. Measured on 2 cores (sqlenv-base, 480 dev episodes at 32 in flight):
 * two replicas of one thread 23.1 s, one of two threads 32.1 s, three or four replicas slower again
 * (docs/inference.md, "Replicas").
 */
export function replicaPlan(input: { provider: string; threads: number; maxBatchSize: number; weightBytes: number; replicas?: number | undefined }): { replicas: number; intraOpThreads: number } {
  const threads = Math.max(1, input.threads);
  const small = input.provider === 'cpu' && input.weightBytes <= REPLICA_MAX_WEIGHT_BYTES;
  const replicas = input.replicas ?? (small ? Math.max(1, Math.min(threads, Math.ceil(input.maxBatchSize / REPLICA_MIN_ROWS))) : 1);
  return { replicas, intraOpThreads: Math.max(1, Math.floor(threads / replicas)) };
}

export interface EngineStats extends SchedulerStats {
  /** Rows per loop iteration, averaged over iterations (rowSteps ÷ steps): the batch the decode ran at. */
  meanBatchSize: number;
}

/**
 * One evaluation lane's side of the engine (`openLane`): it plays episodes one after another, one
 * turn at a time, and is open from its first episode to its last.
 */
export interface EngineLane {
  /** This lane's next turn; `order` is its episode's index (unique among the open lanes). */
  generate(request: TurnRequest, order: number): Promise<TurnResult>;
  /** The lane plays no more episodes. Idempotent. */
  close(): void;
  /**
   * Deterministic engines: the lane's replica and how many there are. The episodes a lane plays
   * must be a fixed share of them (evaluate: indices ≡ `index` mod `count`), so that which episodes
   * a replica plays does not depend on which lane finished first.
   */
  readonly pool?: { index: number; count: number };
}

/** One engine thread: its call plumbing, its latest counters and the turns it holds. */
class Replica {
  readonly rpc: WorkerRpc<EngineRequest, EngineReply>;
  readonly worker: Worker;
  /** The worker's counters as of its latest finished turn. */
  stats: SchedulerStats = emptySchedulerStats();
  inFlight = 0;

  constructor(worker: Worker, log: Logger) {
    this.worker = worker;
    // Registered before the call plumbing's own listener: a turn's counters are in place when its caller resumes.
    worker.on('message', (reply: EngineReply) => {
      if (reply.type === 'turn' && reply.stats.turns >= this.stats.turns) this.stats = reply.stats;
    });
    this.rpc = new WorkerRpc<EngineRequest, EngineReply>(worker, {
      name: 'inference worker',
      replyId: (reply) => (reply.type === 'done' || reply.type === 'error' || reply.type === 'turn' ? reply.id : undefined),
      replyError: (reply) => (reply.type === 'error' ? new AppError(reply.code, reply.message) : undefined),
      logger: log,
    });
  }
}

/** Why a turn request is refused before it is queued (undefined: it is not). */
function checkTurn(request: TurnRequest): AppError | undefined {
  if (Number.isInteger(request.maxNewTokens) && request.maxNewTokens >= 1) return undefined;
  return new AppError(ErrorCode.VALIDATION, `maxNewTokens must be an integer ≥ 1, got ${request.maxNewTokens}`);
}

/** Sum of the replicas' counters. */
function addStats(a: SchedulerStats, b: SchedulerStats): SchedulerStats {
  const sum = { ...a };
  for (const key of Object.keys(sum) as (keyof SchedulerStats)[]) sum[key] += b[key];
  return sum;
}

/**
 * Serves the turns of many concurrent episodes from worker threads (`replicas`). Episodes call
 * `generate()` independently; each worker's engine core (engine-core.ts) batches them continuously:
 * turns join and leave between decode chunks, and each episode's KV cache is kept between its turns
 * (`cacheKey`), so a turn prefills only the tokens appended since the last. Each row draws its own
 * uniforms from its own seed, so a turn's tokens do not depend on its batch-mates, on the chunking,
 * or on whether its cache was reused (docs/inference.md).
 */
export class InferenceEngine {
  readonly vocabSize: number;
  readonly #replicas: Replica[];
  /** Which replica holds each episode's cache (least recently used first; bounded). */
  readonly #home = new Map<string, Replica>();
  readonly #homeLimit: number;
  readonly #deterministic: boolean;
  #nextLane = 0;
  #policyVersion = 0;

  private constructor(replicas: Replica[], vocabSize: number, homeLimit: number, deterministic: boolean) {
    this.vocabSize = vocabSize;
    this.#replicas = replicas;
    this.#homeLimit = homeLimit;
    this.#deterministic = deterministic;
  }

  /** Start the worker threads, load the checkpoint in each and build their generation sessions. */
  static async start(input: InferenceEngineOptions, logger: Logger = silentLogger): Promise<InferenceEngine> {
    const parsed = engineOptionsSchema.safeParse(input);
    if (!parsed.success) throw new AppError(ErrorCode.VALIDATION, `invalid inference engine options: ${formatZodIssues(parsed.error)}`);
    // Before any thread starts: a model that cannot fit the memory limit is refused here (exit 2), and the KV budget follows the limit.
    const plan = planEngineMemory({
      config: readModelConfig(parsed.data.modelDir),
      what: join(parsed.data.modelDir, 'config.json'),
      memoryLimit: readMemoryLimit(),
      lora: parsed.data.lora,
      kvCacheBytes: parsed.data.kvCacheBytes,
      maxBatchSize: parsed.data.maxBatchSize,
    });
    const options: EngineOptions = { ...parsed.data, kvCacheBytes: plan.kvCacheBytes };
    const n = options.replicas;
    // Each replica takes its share of the batch and of the KV budget.
    const setup: EngineWorkerSetup = { options: { ...options, maxBatchSize: Math.ceil(options.maxBatchSize / n), kvCacheBytes: Math.floor(options.kvCacheBytes / n) } };
    const log = logger.child({ component: 'inference-engine' });
    const started = await Promise.allSettled(
      Array.from({ length: n }, () =>
        startRpcWorker(new URL('./engine-worker.ts', import.meta.url), setup, 'inference worker', (message) => {
          const reply = message as EngineReply;
          if (reply.type === 'ready') return reply;
          throw new AppError(ErrorCode.MODEL, reply.type === 'init-error' ? reply.message : `unexpected ${reply.type}`);
        }),
      ),
    );
    const failed = started.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed !== undefined) {
      await Promise.all(started.map((r) => (r.status === 'fulfilled' ? r.value.worker.terminate() : undefined)));
      throw failed.reason;
    }
    const workers = started.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
    const first = workers[0] as (typeof workers)[number];
    log.info({ ...first.ready.session, replicas: n }, 'session created');
    return new InferenceEngine(
      workers.map(({ worker }) => new Replica(worker, log)),
      first.ready.vocabSize,
      4 * options.maxBatchSize,
      options.deterministic,
    );
  }

  /** The newest version every worker thread has acknowledged (turns carry their own, exact one). */
  get policyVersion(): number {
    return this.#policyVersion;
  }

  /** Engine threads (`replicas`). */
  get replicas(): number {
    return this.#replicas.length;
  }

  /** Each replica's counters. */
  get replicaStats(): SchedulerStats[] {
    return this.#replicas.map((r) => ({ ...r.stats }));
  }

  get stats(): EngineStats {
    const s = this.#replicas.map((r) => r.stats).reduce(addStats);
    return { ...s, meanBatchSize: s.steps === 0 ? 0 : s.rowSteps / s.steps };
  }

  /** Whether lanes play in lockstep (engine option `deterministic`). */
  get deterministic(): boolean {
    return this.#deterministic;
  }

  /** Queue one turn; resolves when it has finished (its stop token or its budget). */
  generate(request: TurnRequest): Promise<TurnResult> {
    const invalid = checkTurn(request);
    if (invalid !== undefined) return Promise.reject(invalid);
    return this.#post(this.#route(request.cacheKey), request);
  }

  /**
   * A lane: one evaluation lane, playing episodes one after another. On a deterministic engine lane
   * k lives on replica k mod replicas, which runs nothing while one of its open lanes has no turn
   * there (EngineCore, planAdmission): each decode chunk waits for the next turns of the lanes whose
   * turns ended in the last one, and lane turns are admitted by that chunk, then by episode index, so
   * no batch depends on timing. Otherwise its turns are plain `generate` calls.
   */
  openLane(): EngineLane {
    if (!this.#deterministic) return { generate: (request) => this.generate(request), close: () => undefined };
    const id = this.#nextLane++;
    const index = id % this.#replicas.length;
    const replica = this.#replicas[index] as Replica;
    const post = (message: EngineRequest): void => {
      if (!replica.rpc.closed && replica.rpc.crashed === undefined) replica.worker.postMessage(message);
    };
    post({ type: 'lane', lane: id, open: true });
    let open = true;
    return {
      generate: (request, order) => {
        const invalid = checkTurn(request) ?? (open ? undefined : new AppError(ErrorCode.ABORTED, 'the lane is closed'));
        return invalid === undefined ? this.#post(replica, request, { id, order }) : Promise.reject(invalid);
      },
      close: () => {
        if (!open) return;
        open = false;
        post({ type: 'lane', lane: id, open: false });
      },
      pool: { index, count: this.#replicas.length },
    };
  }

  #post(replica: Replica, request: TurnRequest, lane?: TurnLane): Promise<TurnResult> {
    const turn = {
      promptIds: [...request.promptIds],
      maxNewTokens: request.maxNewTokens,
      ...(request.seed === undefined ? {} : { seed: request.seed }),
      ...(request.temperature === undefined ? {} : { temperature: request.temperature }),
      ...(request.topP === undefined ? {} : { topP: request.topP }),
      ...(request.cacheKey === undefined ? {} : { cacheKey: request.cacheKey }),
    };
    replica.inFlight++;
    return replica.rpc
      .call((id) => ({ type: 'submit', id, turn, ...(lane === undefined ? {} : { lane }) }))
      .then((reply) => {
        if (reply.type !== 'turn') throw new AppError(ErrorCode.INTERNAL, `unexpected ${reply.type} reply from the inference worker`);
        return reply.result;
      })
      .finally(() => {
        replica.inFlight--;
      });
  }

  /**
   * The replica of a turn: its episode's (where its cache is parked), else the one holding the
   * fewest turns. Tokens do not depend on the replica (each row reads its own seed's uniforms).
   */
  #route(cacheKey: string | undefined): Replica {
    if (this.#replicas.length === 1) return this.#replicas[0] as Replica;
    const home = cacheKey === undefined ? undefined : this.#home.get(cacheKey);
    const replica = home ?? this.#replicas.reduce((best, r) => (r.inFlight < best.inFlight ? r : best));
    if (cacheKey !== undefined) {
      this.#home.delete(cacheKey);
      this.#home.set(cacheKey, replica);
      // Episodes do not say when they end: keep the most recent few times the batch.
      for (const key of this.#home.keys()) {
        if (this.#home.size <= this.#homeLimit) break;
        this.#home.delete(key);
      }
    }
    return replica;
  }

  /**
   * Swap the adapter (a new policy version) on every replica; `null` keeps the current tensors and
   * only moves the version (a trainer that published no weights). Turns already
   * posted to the worker finish with the old adapter (the swap waits for them);
   * later ones use the new one. New tensors drop the kept KV caches (computed
   * under the old adapter), so the next turn of each episode re-prefills.
   * Every result carries the version the worker thread actually sampled it with,
   * so a turn posted while the swap is in flight is never tagged with the wrong version.
   */
  async setLora(weights: LoraWeights | null, version: number): Promise<void> {
    if (!Number.isInteger(version) || version < 0) throw new AppError(ErrorCode.VALIDATION, `policy version must be an integer ≥ 0, got ${version}`);
    let copy: Record<string, Float32Array> | null = null;
    if (weights !== null) {
      copy = {};
      for (const [name, values] of weights) copy[name] = values;
    }
    const replies = await Promise.all(this.#replicas.map((r) => r.rpc.call((id) => ({ type: 'set-lora', id, weights: copy, version }))));
    const acknowledged = minOf(replies.map((reply) => (reply.type === 'done' ? reply.policyVersion : -1)));
    if (acknowledged >= 0) this.#policyVersion = Math.max(this.#policyVersion, acknowledged);
  }

  /** Stop the workers; pending turns fail with ABORTED. Idempotent. */
  async close(): Promise<void> {
    await Promise.all(this.#replicas.map((r) => r.rpc.close('the inference engine was closed')));
  }
}
