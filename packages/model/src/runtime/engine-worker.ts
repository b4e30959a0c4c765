import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parentPort, workerData } from 'node:worker_threads';
import type { SessionConfig } from '@sqlenv/onnx-graph';
import { ErrorCode, isAppError, workerInput } from '@sqlenv/shared';
import { Generator } from './generator.ts';
import type { LoraConfig } from '../graphs/lora.ts';
import { TurnScheduler, type SchedulerResult, type SchedulerStats, type SchedulerTurn, type TurnSchedulerOptions } from './turn-scheduler.ts';
import { loadModel } from '../io/weights.ts';
import { isBigModel, weightBytes } from './prepacking.ts';

/**
 * Worker-thread side of the inference engine: loads the checkpoint itself
 * (weights never cross threads), owns the generation session in direct mode
 * and the turn scheduler (continuous batching, per-episode KV caches: the
 * caches never cross threads either). ORT's `run` blocks this thread, not the
 * main one, so BullMQ locks and the server keep moving (docs/architecture.md).
 */
export interface EngineWorkerSetup {
  modelDir: string;
  lora: LoraConfig | undefined;
  inPlaceWeights: boolean;
  /** Undefined: by the weights' size (`isBigModel`). */
  loadViaFile?: boolean;
  /** Undefined: decided by the weights' size (Generator `disablePrepacking`). */
  disablePrepacking: boolean | undefined;
  session: Omit<SessionConfig, 'logger' | 'mode'>;
  /** Scheduler settings; `stopIds` undefined: the checkpoint's eos ids. */
  scheduler: Omit<TurnSchedulerOptions, 'stopIds'> & { stopIds: number[] | undefined };
}

export type EngineRequest =
  | { type: 'submit'; id: number; turn: SchedulerTurn }
  /** New adapter tensors (null: keep the current ones) and the policy version they are. */
  | { type: 'set-lora'; id: number; weights: Record<string, Float32Array> | null; version: number };

export type EngineReply =
  /** `session`: the generation session's provider, threads and placement (logged by the engine: this thread has no logger). */
  | { type: 'ready'; vocabSize: number; eosTokenIds: number[]; padTokenId: number; numHeads: number; session: Record<string, unknown> }
  | { type: 'init-error'; message: string }
  /** A finished turn; its `policyVersion` is the adapter's it was sampled with (set here, so it cannot race a swap). */
  | { type: 'turn'; id: number; result: SchedulerResult; stats: SchedulerStats }
  /** A swap applied. */
  | { type: 'done'; id: number; policyVersion: number }
  | { type: 'error'; id: number; message: string; code: ErrorCode };

const port = parentPort;
if (port !== null) {
  const setup = workerInput<EngineWorkerSetup>(workerData);
  const reply = (message: EngineReply): void => port.postMessage(message);
  let generator: Generator | undefined;
  let fileDir: string | undefined;
  try {
    const { config, weights } = loadModel(setup.modelDir);
    if (setup.loadViaFile ?? isBigModel(weightBytes(weights))) fileDir = mkdtempSync(join(tmpdir(), 'sqlenv-engine-model-'));
    generator = await Generator.create(config, weights, {
      ...(setup.lora === undefined ? {} : { lora: setup.lora }),
      inPlaceWeights: setup.inPlaceWeights,
      ...(setup.disablePrepacking === undefined ? {} : { disablePrepacking: setup.disablePrepacking }),
      session: { ...setup.session, mode: 'direct' },
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
    const scheduler = new TurnScheduler(active, { ...setup.scheduler, stopIds: setup.scheduler.stopIds ?? active.config.eosTokenIds });
    const fail = (id: number, error: unknown): void =>
      reply({ type: 'error', id, message: error instanceof Error ? error.message : String(error), code: isAppError(error) ? error.code : ErrorCode.RUNTIME });
    // Messages arrive between the scheduler's runs (it yields to the event loop after each), in order:
    // a swap applies after the turns posted before it and before those posted after it.
    port.on('message', (request: EngineRequest) => {
      if (request.type === 'set-lora') {
        const weights = request.weights === null ? null : new Map(Object.entries(request.weights));
        scheduler.setLora(weights, request.version).then(
          () => reply({ type: 'done', id: request.id, policyVersion: request.version }),
          (error: unknown) => fail(request.id, error),
        );
        return;
      }
      scheduler.submit(request.turn).then(
        (result) => reply({ type: 'turn', id: request.id, result, stats: { ...scheduler.stats } }),
        (error: unknown) => fail(request.id, error),
      );
    });
  }
}
