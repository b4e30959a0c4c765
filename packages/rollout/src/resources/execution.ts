import type { Provider } from '@sqlenv/onnx-graph';

/** Where a process's model sessions run: the provider, its device and the threads of one session. */
export interface ModelExecution {
  provider: Provider;
  deviceId: number;
  intraOpThreads: number;
  interOpThreads: number;
}
