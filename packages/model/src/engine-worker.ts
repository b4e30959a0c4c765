import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parentPort, workerData } from 'node:worker_threads';
import type { SessionConfig } from '@sqlenv/onnx-graph';
import { ErrorCode, isAppError, workerInput } from '@sqlenv/shared';
import { Generator, type GenerateOptions, type GenerationRequest, type GenerationResult } from './generator.ts';
import type { LoraConfig, LoraWeights } from './lora.ts';
import { loadModel } from './weights.ts';

/**
 * Worker-thread side of the inference engine: loads the checkpoint itself
 * (weights never cross threads), owns the generation session in direct mode,
 * and runs one batch at a time. ORT's `run` blocks this thread, not the main
 * one, so BullMQ locks and the server keep moving (docs/architecture.md).
 */
export interface EngineWorkerSetup {
  modelDir: string;
  lora: LoraConfig | undefined;
  inPlaceWeights: boolean;
  loadViaFile: boolean;
  session: Omit<SessionConfig, 'logger' | 'mode'>;
}

export type EngineRequest =
  | { type: 'generate'; id: number; requests: GenerationRequest[]; options: Omit<GenerateOptions, 'lora'> }
  /** New adapter tensors (null: keep the current ones) and the policy version they are. */
  | { type: 'set-lora'; id: number; weights: Record<string, Float32Array> | null; version: number };

export type EngineReply =
  /** `session`: the generation session's provider, threads and placement (logged by the engine: this thread has no logger). */
  | { type: 'ready'; vocabSize: number; eosTokenIds: number[]; padTokenId: number; numHeads: number; session: Record<string, unknown> }
  | { type: 'init-error'; message: string }
  /** `policyVersion`: the version of the adapter this batch was sampled with (set by the worker, so it cannot race a swap). */
  | { type: 'done'; id: number; results?: GenerationResult[]; policyVersion: number }
  | { type: 'error'; id: number; message: string; code: ErrorCode };

const port = parentPort;
if (port !== null) {
  const setup = workerInput<EngineWorkerSetup>(workerData);
  const reply = (message: EngineReply): void => port.postMessage(message);
  let generator: Generator | undefined;
  const fileDir = setup.loadViaFile ? mkdtempSync(join(tmpdir(), 'sqlenv-engine-model-')) : undefined;
  try {
    const { config, weights } = loadModel(setup.modelDir);
    generator = await Generator.create(config, weights, {
      ...(setup.lora === undefined ? {} : { lora: setup.lora }),
      inPlaceWeights: setup.inPlaceWeights,
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
    let lora: LoraWeights | undefined;
    let version = 0;
    // One message at a time, in order: a LoRA swap lands between two batches, never inside one.
    let queue: Promise<void> = Promise.resolve();
    port.on('message', (request: EngineRequest) => {
      queue = queue.then(async () => {
        try {
          if (request.type === 'set-lora') {
            if (request.weights !== null) lora = new Map(Object.entries(request.weights));
            version = request.version;
            reply({ type: 'done', id: request.id, policyVersion: version });
            return;
          }
          // Read once, before the run: the version that goes back is the adapter's this batch used.
          const used = version;
          const results = await active.generate(request.requests, { ...request.options, ...(lora === undefined ? {} : { lora }) });
          reply({ type: 'done', id: request.id, results, policyVersion: used });
        } catch (error) {
          reply({
            type: 'error',
            id: request.id,
            message: error instanceof Error ? error.message : String(error),
            code: isAppError(error) ? error.code : ErrorCode.RUNTIME,
          });
        }
      });
    });
  }
}
