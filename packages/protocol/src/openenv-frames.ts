import { z } from 'zod';
import { StepResultSchema } from './sql-observation.ts';
import { EpisodeStateSchema, ResetOptionsSchema } from './episode.ts';

/**
 * OpenEnv wire frames (packages/env-server/README.md): the WebSocket session
 * protocol of `/ws` and the HTTP request bodies of `/reset` and `/step`.
 * Server and client both parse with these, so they cannot drift.
 */

/** Error codes of an OpenEnv `error` frame. */
export const WsErrorCode = {
  INVALID_JSON: 'INVALID_JSON',
  UNKNOWN_TYPE: 'UNKNOWN_TYPE',
  VALIDATION_ERROR: 'VALIDATION_ERROR',
  EXECUTION_ERROR: 'EXECUTION_ERROR',
  CAPACITY_REACHED: 'CAPACITY_REACHED',
  FACTORY_ERROR: 'FACTORY_ERROR',
  SESSION_ERROR: 'SESSION_ERROR',
} as const;
export type WsErrorCode = (typeof WsErrorCode)[keyof typeof WsErrorCode];
export const wsErrorCodes = Object.values(WsErrorCode) as [WsErrorCode, ...WsErrorCode[]];

/** Codes after which the server keeps the session open; the others end it (close 1000). */
export const sessionKeepingErrorCodes: ReadonlySet<WsErrorCode> = new Set([
  WsErrorCode.INVALID_JSON,
  WsErrorCode.UNKNOWN_TYPE,
  WsErrorCode.VALIDATION_ERROR,
  WsErrorCode.EXECUTION_ERROR,
]);

/** The frame types a client may send. */
export const clientFrameTypes = ['reset', 'step', 'state', 'close', 'mcp'] as const;
export type ClientFrameType = (typeof clientFrameTypes)[number];

const JsonObject = z.record(z.string(), z.unknown());

// Client → server. Strict objects: unknown top-level keys are a VALIDATION_ERROR (OpenEnv forbids extras).
export const ResetFrameSchema = z.strictObject({ type: z.literal('reset'), data: JsonObject.optional() });
export const StepFrameSchema = z.strictObject({ type: z.literal('step'), data: JsonObject });
export const StateRequestFrameSchema = z.strictObject({ type: z.literal('state') });
export const CloseFrameSchema = z.strictObject({ type: z.literal('close') });
export const McpFrameSchema = z.strictObject({ type: z.literal('mcp'), data: JsonObject });
export const ClientFrameSchema = z.discriminatedUnion('type', [
  ResetFrameSchema,
  StepFrameSchema,
  StateRequestFrameSchema,
  CloseFrameSchema,
  McpFrameSchema,
]);
export type ClientFrame = z.infer<typeof ClientFrameSchema>;

/** One validation problem, in the shape OpenEnv (pydantic) reports: location, message, kind. */
export const ValidationIssueSchema = z.looseObject({
  loc: z.array(z.union([z.string(), z.number()])),
  msg: z.string(),
  type: z.string(),
});
export type ValidationIssue = z.infer<typeof ValidationIssueSchema>;

// Server → client. `data` of an error frame is loose: OpenEnv adds code-specific fields.
export const ErrorFrameDataSchema = z.looseObject({
  message: z.string(),
  code: z.enum(wsErrorCodes),
  /** VALIDATION_ERROR only. */
  errors: z.array(ValidationIssueSchema).optional(),
  /** CAPACITY_REACHED only. */
  active_sessions: z.number().int().nonnegative().optional(),
  max_sessions: z.number().int().nonnegative().optional(),
  /** Our extension: the AppError code behind the frame, so clients can map it precisely. */
  app_code: z.string().optional(),
});
export type ErrorFrameData = z.infer<typeof ErrorFrameDataSchema>;

export const JsonRpcResponseSchema = z.looseObject({
  jsonrpc: z.literal('2.0'),
  id: z.union([z.string(), z.number(), z.null()]),
  result: z.unknown().optional(),
  error: z.looseObject({ code: z.number().int(), message: z.string(), data: z.unknown().optional() }).optional(),
});
export type JsonRpcResponse = z.infer<typeof JsonRpcResponseSchema>;

export const ObservationFrameSchema = z.strictObject({ type: z.literal('observation'), data: StepResultSchema });
export const StateReplyFrameSchema = z.strictObject({ type: z.literal('state'), data: EpisodeStateSchema });
export const ErrorFrameSchema = z.strictObject({ type: z.literal('error'), data: ErrorFrameDataSchema });
export const McpReplyFrameSchema = z.strictObject({ type: z.literal('mcp'), data: JsonRpcResponseSchema });
export const ServerFrameSchema = z.discriminatedUnion('type', [
  ObservationFrameSchema,
  StateReplyFrameSchema,
  ErrorFrameSchema,
  McpReplyFrameSchema,
]);
export type ServerFrame = z.infer<typeof ServerFrameSchema>;
export type ObservationFrame = z.infer<typeof ObservationFrameSchema>;
export type StateReplyFrame = z.infer<typeof StateReplyFrameSchema>;
export type ErrorFrame = z.infer<typeof ErrorFrameSchema>;
export type McpReplyFrame = z.infer<typeof McpReplyFrameSchema>;

/**
 * HTTP `POST /reset` body: OpenEnv's ResetRequest (seed, episode_id, extra
 * kwargs allowed) plus our `session_id` to reset an existing HTTP session.
 */
export const HttpResetRequestSchema = z.looseObject({
  ...ResetOptionsSchema.shape,
  session_id: z.string().min(1).max(255).optional().describe('Reuse this HTTP session (from an earlier /reset) instead of opening a new one'),
});
export type HttpResetRequest = z.infer<typeof HttpResetRequestSchema>;

/**
 * HTTP `POST /step` body: OpenEnv's StepRequest (what its clients send:
 * action, timeout_s, request_id) plus our optional `session_id`. Strict: a
 * misspelt key (`sesion_id`) would otherwise turn a session step into a
 * stateless one without a word.
 */
export const HttpStepRequestSchema = z.strictObject({
  action: JsonObject.describe('Action fields (see the action schema)'),
  timeout_s: z.number().positive().optional().describe('Accepted for OpenEnv compatibility; the SQL timeout of the server applies'),
  request_id: z.string().max(255).optional(),
  session_id: z.string().min(1).max(255).optional().describe('The session_id returned by /reset; without it the call is stateless'),
});
export type HttpStepRequest = z.infer<typeof HttpStepRequestSchema>;

/** HTTP `POST /reset` and `/step` reply: the OpenEnv result plus `session_id` when a session is involved. */
export const HttpStepResponseSchema = StepResultSchema.extend({
  session_id: z.string().optional().describe('HTTP session holding this episode (also in the X-Session-Id header)'),
});
export type HttpStepResponse = z.infer<typeof HttpStepResponseSchema>;
