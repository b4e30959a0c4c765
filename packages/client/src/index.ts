export {
  SQLEnvClient,
  SQLEnvClientOptionsSchema,
  type SQLEnvClientOptions,
  type RemoteEnvironment,
  type ResetRequest,
} from './sqlenv-client.ts';
export { appErrorFromFrame } from './error-frames.ts';
export { toWebSocketUrl } from './ws-url.ts';
