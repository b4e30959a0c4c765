import type { Worker } from 'node:worker_threads';
import { AppError, ErrorCode, toAppError } from './app-error.ts';
import { silentLogger, type Logger } from './logger.ts';
import { startWorker } from './ts-worker.ts';

/**
 * Request/reply over a worker thread, written once for every thread that owns a blocking resource
 * (an ONNX Runtime session, the inference engine): numbered requests, a map of pending calls, and
 * the rule that a thread that dies or exits fails every call in flight and every later one with the
 * same error, instead of leaving promises that never settle.
 */
export interface WorkerRpcOptions<Reply> {
  /** Names the thread in errors and logs ("session worker", "inference worker"). */
  name: string;
  /** The id of the call a message answers, or undefined for messages that answer no call. */
  replyId: (message: Reply) => number | undefined;
  /** A reply that reports a failure, as the error its call rejects with; undefined for a success. */
  replyError: (reply: Reply) => AppError | undefined;
  logger?: Logger;
}

export class WorkerRpc<Request, Reply> {
  readonly #worker: Worker;
  readonly #options: WorkerRpcOptions<Reply>;
  readonly #pending = new Map<number, { resolve: (reply: Reply) => void; reject: (error: AppError) => void }>();
  #nextId = 0;
  #closed = false;
  #crashed: AppError | undefined;

  constructor(worker: Worker, options: WorkerRpcOptions<Reply>) {
    this.#worker = worker;
    this.#options = options;
    const log = options.logger ?? silentLogger;
    worker.on('message', (message: Reply) => {
      const id = options.replyId(message);
      if (id === undefined) return;
      const call = this.#pending.get(id);
      if (call === undefined) return;
      this.#pending.delete(id);
      const error = options.replyError(message);
      if (error === undefined) call.resolve(message);
      else call.reject(error);
    });
    const fail = (error: AppError): void => {
      if (this.#closed || this.#crashed !== undefined) return;
      this.#crashed = error;
      log.error({ err: error }, `${options.name} died`);
      this.#rejectAll(error);
    };
    worker.on('error', (e) => fail(new AppError(ErrorCode.EXECUTOR_CRASHED, `${options.name} failed: ${e.message}`, { cause: e })));
    worker.on('exit', (code) => fail(new AppError(ErrorCode.EXECUTOR_CRASHED, `${options.name} exited with code ${code}`)));
  }

  /** The error the thread died with, if it did (every call then fails with it). */
  get crashed(): AppError | undefined {
    return this.#crashed;
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** Post the request `make(id)` builds and resolve with its reply. */
  call(make: (id: number) => Request): Promise<Reply> {
    if (this.#closed) return Promise.reject(new AppError(ErrorCode.ABORTED, `the ${this.#options.name} is closed`));
    if (this.#crashed !== undefined) return Promise.reject(this.#crashed);
    const id = this.#nextId++;
    return new Promise<Reply>((resolve, reject) => {
      this.#pending.set(id, { resolve, reject });
      // Structured clone: the caller keeps its buffers.
      this.#worker.postMessage(make(id));
    });
  }

  /** Fail the calls in flight with ABORTED and stop the thread. Idempotent. */
  async close(reason = `the ${this.#options.name} was closed`): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#rejectAll(new AppError(ErrorCode.ABORTED, reason));
    await this.#worker.terminate();
  }

  #rejectAll(error: AppError): void {
    for (const call of this.#pending.values()) call.reject(error);
    this.#pending.clear();
  }
}

/**
 * Start a worker thread and wait for its first message, which `ready` turns into the thread's
 * description (or throws for an init error). A thread that fails to start, or answers anything but
 * ready, is terminated and the error thrown. Only this function's own listeners are removed
 * afterwards: `removeAllListeners()` would also drop the Worker's internal ones, after which replies
 * sat undelivered until the thread exited.
 */
export async function startRpcWorker<Ready>(entry: URL, data: unknown, name: string, ready: (message: unknown) => Ready): Promise<{ worker: Worker; ready: Ready }> {
  const worker = startWorker(entry, { data });
  let onMessage: ((message: unknown) => void) | undefined;
  let onError: ((e: Error) => void) | undefined;
  try {
    const description = await new Promise<Ready>((resolve, reject) => {
      onMessage = (message) => {
        try {
          resolve(ready(message));
        } catch (error) {
          reject(toAppError(error, ErrorCode.RUNTIME));
        }
      };
      onError = (e) => reject(new AppError(ErrorCode.EXECUTOR_CRASHED, `${name} failed to start: ${e.message}`, { cause: e }));
      worker.once('message', onMessage);
      worker.once('error', onError);
    });
    return { worker, ready: description };
  } catch (error) {
    await worker.terminate();
    throw error;
  } finally {
    if (onMessage !== undefined) worker.off('message', onMessage);
    if (onError !== undefined) worker.off('error', onError);
  }
}
