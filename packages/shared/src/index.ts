export { AppError, ErrorCode, isAppError, toAppError, type AppErrorOptions } from './app-error.ts';
export { createRootLogger, silentLogger, type Logger } from './logger.ts';
export { startWorker, workerInput } from './ts-worker.ts';
export { parseEnv, formatZodIssues } from './env.ts';
export { withShutdownSignal } from './shutdown-signal.ts';
export { processCpuMs } from './process-cpu.ts';
export { PhaseProgress, progressMode, progressLine, barCells, formatDuration, etaSeconds, type ProgressMode } from './progress.ts';
export { ensurePrivateDir, readTrustedFile, writeExclusiveTemp, writePrivateFile, type PrivateDirOptions } from './private-dir.ts';
export { WorkerRpc, startRpcWorker, type WorkerRpcOptions } from './worker-rpc.ts';
