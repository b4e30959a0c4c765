export { RemoteCompletionSource, checkedCompletion, type RemoteCompletionSourceOptions } from './remote-completion-source.ts';
export { InferencePool, InferencePoolConfigSchema, InferenceServer, StickyServer, type InferencePoolConfig } from './inference-pool.ts';
export { AdapterManager, type AdapterManagerOptions } from './adapter-manager.ts';
export { checkInferenceServers, type ServedBaseModel } from './server-check.ts';
export { remoteSamplingProblem } from './remote-sampling.ts';
export { httpCall, ServerUnreachableError, type HttpCallOptions, type HttpReply } from './http-call.ts';
