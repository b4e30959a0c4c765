import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parentPort, workerData } from 'node:worker_threads';
import { ErrorCode, isAppError, workerInput } from '@sqlenv/shared';
import { EngineCore } from './engine-core.ts';
import { schedulerPolicy, type EngineOptions } from './engine-options.ts';
import type { TurnLane, TurnRequest, TurnResult } from './executor.ts';
import { Generator } from './generator.ts';
import { loadModel } from '../io/weights.ts';
import { isBigModel, weightBytes } from './prepacking.ts';
import type { SchedulerStats } from './scheduler-stats.ts';

/**
 * Worker-thread side of the inference engine: loads the checkpoint itself
 * (weights never cross threads), owns the generation session in direct mode
 * and the engine core (continuous batching, per-episode KV caches: the
 * caches never cross threads either). ORT's `run` blocks this thread, not the
 * main one, so BullMQ locks and the server keep moving (docs/architecture.md).
 */
export interface EngineWorkerSetup {
  /** The engine's parsed options, `maxBatchSize` and `kvCacheBytes` this replica's share. */
  options: EngineOptions;
}

export type EngineRequest =
  /** A turn; `lane`: the evaluation lane it comes from (deterministic engines). */
  | { type: 'submit'; id: number; turn: TurnRequest; lane?: TurnLane }
  /** An evaluation lane opens or closes on this replica (deterministic engines); no reply. */
  | { type: 'lane'; lane: number; open: boolean }
  /** New adapter tensors (null: keep the current ones) and the policy version they are. */
  | { type: 'set-lora'; id: number; weights: Record<string, Float32Array> | null; version: number };

export type EngineReply =
  /** `session`: the generation session's provider, threads and placement (logged by the engine: this thread has no logger). */
  | { type: 'ready'; vocabSize: number; eosTokenIds: number[]; padTokenId: number; numHeads: number; session: Record<string, unknown> }
  | { type: 'init-error'; message: string }
  /** A finished turn; its `policyVersion` is the adapter's it was sampled with (set here, so it cannot race a swap). */
  | { type: 'turn'; id: number; result: TurnResult; stats: SchedulerStats }
  /** A swap applied. */
  | { type: 'done'; id: number; policyVersion: number }
  | { type: 'error'; id: number; message: string; code: ErrorCode };

const port = parentPort;
if (port !== null) {
  const { options } = workerInput<EngineWorkerSetup>(workerData);
  const reply = (message: EngineReply): void => port.postMessage(message);
  let generator: Generator | undefined;
  let fileDir: string | undefined;
  try {
    const { config, weights } = loadModel(options.modelDir);
    if (options.experimental.loadViaFile ?? isBigModel(weightBytes(weights))) fileDir = mkdtempSync(join(tmpdir(), 'sqlenv-engine-model-'));
    generator = await Generator.create(config, weights, {
      ...(options.lora === undefined ? {} : { lora: options.lora }),
      ...(options.experimental.disablePrepacking === undefined ? {} : { disablePrepacking: options.experimental.disablePrepacking }),
      session: { provider: options.provider, deviceId: options.deviceId, intraOpThreads: options.intraOpThreads, interOpThreads: options.interOpThreads, cpuMemArena: options.cpuMemArena, mode: 'direct' },
      ...(fileDir === undefined ? {} : { modelFile: join(fileDir, 'generation.onnx'), releaseWeights: true }),
    });
    reply({ type: 'ready', vocabSize: config.vocabSize, eosTokenIds: config.eosTokenIds, padTokenId: config.padTokenId, numHeads: config.numHeads, session: generator.sessionRecord });
  } catch (error) {
    reply({ type: 'init-error', message: error instanceof Error ? error.message : String(error) });
  } finally {
    // ORT has the model once the session exists (a mapped file stays readable after unlinking).
    if (fileDir !== undefined) rmSync(fileDir, { recursive: true, force: true });
  }
  const active = generator;
  if (active !== undefined) {
    const core = new EngineCore(active, schedulerPolicy(options, active.config));
    const fail = (id: number, error: unknown): void =>
      reply({ type: 'error', id, message: error instanceof Error ? error.message : String(error), code: isAppError(error) ? error.code : ErrorCode.RUNTIME });
    // Messages arrive between the core's runs (it yields to the event loop after each), in order:
    // a swap applies after the turns posted before it and before those posted after it.
    port.on('message', (request: EngineRequest) => {
      if (request.type === 'set-lora') {
        const weights = request.weights === null ? null : new Map(Object.entries(request.weights));
        core.setLora(weights, request.version).then(
          () => reply({ type: 'done', id: request.id, policyVersion: request.version }),
          (error: unknown) => fail(request.id, error),
        );
        return;
      }
      if (request.type === 'lane') {
        if (request.open) core.openLane(request.lane);
        else core.closeLane(request.lane);
        return;
      }
      core.submit(request.turn, request.lane).then(
        (result) => reply({ type: 'turn', id: request.id, result, stats: { ...core.stats } }),
        (error: unknown) => fail(request.id, error),
      );
    });
  }
}
