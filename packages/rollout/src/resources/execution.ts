import type { Provider } from '@sqlenv/onnx-graph';

/** Where a process's model sessions run: the provider, its device and the threads of one session. */
export interface ModelExecution {
  provider: Provider;
  deviceId: number;
  intraOpThreads: number;
  interOpThreads: number;
  /**
   * ONNX Runtime's CPU memory arena for every model session (the inference engine's generation
   * session, the learner's, SFT's: SessionConfig `cpuMemArena`). Default: on, ORT's default; off
   * holds less memory between runs at a large cost in time for big models (docs/inference.md).
   */
  cpuMemArena?: boolean;
}
