import { parentPort, workerData } from 'node:worker_threads';
import * as ort from 'onnxruntime-node';
import { workerInput } from '@sqlenv/shared';
import type { TensorData } from '../tensor-data.ts';
import { ortModelArg, runOrt } from './ort-convert.ts';

/** Worker thread entry: owns one ORT session; runs requests one at a time, in order. */
export interface WorkerSetup {
  /** A model file's path, or the model's bytes. */
  model: string | Uint8Array;
  options: ort.InferenceSession.SessionOptions;
}

export type WorkerRequest = { type: 'run'; id: number; feeds: Record<string, TensorData>; outputs?: string[] };

export type WorkerReply =
  | { type: 'ready'; inputNames: string[]; outputNames: string[] }
  | { type: 'init-error'; message: string }
  | { type: 'result'; id: number; outputs: Record<string, TensorData> }
  | { type: 'run-error'; id: number; message: string };

const port = parentPort;
if (port) {
  let setup: WorkerSetup | undefined = workerInput<WorkerSetup>(workerData);
  // The model's copy in this thread is needed only until ORT has loaded it (ORT copies what it
  // keeps): unhook it from workerData too, so nothing here keeps it reachable afterwards.
  delete (workerData as { data?: unknown }).data;
  const reply = (message: WorkerReply, transfer: ArrayBuffer[] = []): void => port.postMessage(message, transfer);
  let session: ort.InferenceSession | undefined;
  try {
    const { options } = setup;
    const model = ortModelArg(setup.model);
    setup = undefined;
    // Two overloads (path, bytes): TypeScript does not pick one for the union.
    session = typeof model === 'string' ? await ort.InferenceSession.create(model, options) : await ort.InferenceSession.create(model, options);
    reply({ type: 'ready', inputNames: [...session.inputNames], outputNames: [...session.outputNames] });
  } catch (error) {
    reply({ type: 'init-error', message: error instanceof Error ? error.message : String(error) });
  }
  const s = session;
  if (s) {
    // Requests are chained so runs never overlap on one session.
    let queue: Promise<void> = Promise.resolve();
    port.on('message', (request: WorkerRequest) => {
      queue = queue.then(async () => {
        try {
          const outputs = await runOrt(s, request.feeds, request.outputs);
          // Output buffers are fresh copies from ORT: transfer them instead of cloning.
          const transfer = Object.values(outputs).map((t) => t.data.buffer as ArrayBuffer);
          reply({ type: 'result', id: request.id, outputs }, [...new Set(transfer)]);
        } catch (error) {
          reply({ type: 'run-error', id: request.id, message: error instanceof Error ? error.message : String(error) });
        }
      });
    });
  }
}
