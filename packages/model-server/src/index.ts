export { listeningUrlOf, LISTENING_MESSAGE, ModelServer, modelServerOptionsSchema, type ModelServerOptions, type ModelServerEngineOptions } from './model-server.ts';
export { ModelGate } from './model-gate.ts';
export { ContextCache } from './context-cache.ts';
