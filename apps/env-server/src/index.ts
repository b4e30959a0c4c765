export { createEnvServer, type EnvServer, type EnvServerOptions } from './env-server.ts';
export { serveCommand, parseServeConfig, startServer, serveUntilSignal, SERVE_USAGE, type RunningServer } from './serve-command.ts';
export { EnvServerLimitsSchema, ServeConfigSchema, ServeEnvSchema, type EnvServerLimits, type EnvServerLimitsInput, type ServeConfig } from './config.ts';
export type { ServedRuntime, ServedEnvironment, ServedDataset, CatalogQuestion } from './env-runtime.ts';
export { CatalogDocumentSchema, type CatalogDocument } from './catalog.ts';
export { ServerMetadataSchema, type ServerMetadata, SESSION_HEADER } from './http-routes.ts';
export { BEARER_SUBPROTOCOL_PREFIX, SQLENV_SUBPROTOCOL } from './auth.ts';
export { CloseCode } from './ws-session.ts';
