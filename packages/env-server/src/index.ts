export { createEnvServer, type EnvServer, type EnvServerOptions } from './env-server.ts';
export { resolveServeConfig, startServer, serveUntilSignal, type RunningServer } from './serve.ts';
export { EnvServerLimitsSchema, ServeConfigSchema, ServeEnvSchema, splitList, type EnvServerLimits, type EnvServerLimitsInput, type ServeConfig } from './config.ts';
export type { ServedRuntime, ServedEnvironment, ServedDataset, CatalogQuestion } from './env-runtime.ts';
export { CatalogDocumentSchema, type CatalogDocument } from './catalog.ts';
export { ServerMetadataSchema, type ServerMetadata, SESSION_HEADER } from './http-routes.ts';
export { BEARER_SUBPROTOCOL_PREFIX, SQLENV_SUBPROTOCOL } from './auth.ts';
export { CloseCode } from './ws-session.ts';
