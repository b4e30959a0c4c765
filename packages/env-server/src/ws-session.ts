import type { RawData, WebSocket } from 'ws';
import { ErrorCode, toAppError, type Logger } from '@sqlenv/shared';
import {
  ClientFrameSchema,
  WsErrorCode,
  clientFrameTypes,
  type ClientFrame,
  type ErrorFrameData,
  type ServerFrame,
} from '@sqlenv/protocol';
import type { EnvActions } from './env-actions.ts';
import type { EnvSession } from './env-session.ts';
import { requestErrorFrame, toValidationIssues } from './error-mapping.ts';
import { fastClientFrame } from './fast-parse.ts';
import { mcpReply } from './mcp-reply.ts';
import type { ServerMetrics } from './server-metrics.ts';
import type { EndReason, SessionRegistry } from './session-registry.ts';

/** WebSocket close codes used by the server. */
export const CloseCode = { NORMAL: 1000, GOING_AWAY: 1001 } as const;

export interface WsSessionDeps {
  registry: SessionRegistry;
  actions: EnvActions;
  metrics: ServerMetrics;
  logger: Logger;
  maxFrameBytes: number;
  maxQueuedRequests: number;
  idleTimeoutS: number;
}

/** What handling one frame produced: a reply, or the end of the session. */
type Outcome = { reply: ServerFrame } | { close: true };

/**
 * Serve the OpenEnv session protocol on one accepted WebSocket: one
 * environment for the connection's life, exactly one reply per request, in
 * request order (frames queue on the session while step() is in flight).
 */
export function serveWebSocket(ws: WebSocket, deps: WsSessionDeps): void {
  let session: EnvSession;
  try {
    session = deps.registry.open('ws', (reason) => endSession(ws, deps, reason));
  } catch (error) {
    // OpenEnv accepts the handshake first, then sends one error frame and closes (1000).
    rejectSession(ws, deps, error);
    return;
  }
  const log = deps.logger.child({ sessionId: session.id });
  log.debug('ws session opened');
  let paused = false;

  ws.on('message', (data: RawData) => {
    const sizeBytes = rawSize(data);
    void session
      .enqueue(() => handleFrame(data, sizeBytes))
      .then((outcome) => {
        if ('close' in outcome) {
          ws.close(CloseCode.NORMAL);
          return;
        }
        send(ws, deps, outcome.reply);
      })
      .catch((error: unknown) => log.error({ err: error }, 'ws frame handler failed'))
      .finally(() => {
        if (paused && session.depth < deps.maxQueuedRequests) {
          paused = false;
          ws.resume();
        }
      });
    // Backpressure: a client pipelining faster than its env steps stops being read, not buffered without bound.
    if (!paused && session.depth >= deps.maxQueuedRequests) {
      paused = true;
      ws.pause();
    }
  });

  ws.on('close', () => {
    // Let a running step finish before the environment is closed under it.
    void session.drained().then(() => {
      deps.registry.remove(session.id);
      log.debug('ws session closed');
    });
  });
  ws.on('error', (error) => log.warn({ err: error }, 'ws socket error'));

  async function handleFrame(data: RawData, sizeBytes: number): Promise<Outcome> {
    // The socket went away while this frame waited in the queue: nobody to answer.
    if (ws.readyState !== ws.OPEN) return { close: true };
    if (sizeBytes > deps.maxFrameBytes) {
      return errorOutcome(deps, {
        message: `Frame of ${sizeBytes} bytes exceeds the limit of ${deps.maxFrameBytes} bytes`,
        code: WsErrorCode.VALIDATION_ERROR,
        errors: [{ loc: [], msg: `frame larger than ${deps.maxFrameBytes} bytes`, type: 'frame_too_large' }],
      });
    }
    let json: unknown;
    try {
      json = JSON.parse(rawText(data));
    } catch (error) {
      return errorOutcome(deps, { message: `Invalid JSON: ${error instanceof Error ? error.message : String(error)}`, code: WsErrorCode.INVALID_JSON });
    }
    if (typeof json !== 'object' || json === null || Array.isArray(json)) {
      return errorOutcome(deps, {
        message: 'Invalid message',
        code: WsErrorCode.VALIDATION_ERROR,
        errors: [{ loc: [], msg: 'a frame must be a JSON object', type: 'object_type' }],
      });
    }
    const type = (json as Record<string, unknown>)['type'];
    if (typeof type !== 'string' || !(clientFrameTypes as readonly string[]).includes(type)) {
      return errorOutcome(deps, { message: `Unknown message type: ${typeof type === 'string' ? type : JSON.stringify(type ?? '')}`, code: WsErrorCode.UNKNOWN_TYPE });
    }
    let frame = fastClientFrame(json as Record<string, unknown>);
    if (frame === undefined) {
      const parsed = ClientFrameSchema.safeParse(json);
      if (!parsed.success) {
        return errorOutcome(deps, { message: 'Invalid message', code: WsErrorCode.VALIDATION_ERROR, errors: toValidationIssues(parsed.error) });
      }
      frame = parsed.data;
    }
    try {
      return await runFrame(frame);
    } catch (error) {
      const frame = requestErrorFrame(error);
      if (frame.code === WsErrorCode.EXECUTION_ERROR) log.warn({ err: error }, 'ws request failed');
      return errorOutcome(deps, frame);
    }
  }

  async function runFrame(frame: ClientFrame): Promise<Outcome> {
    switch (frame.type) {
      case 'reset':
        return { reply: { type: 'observation', data: await deps.actions.reset(session.envForReset(), frame.data ?? {}, 'ws', ['data']) } };
      case 'step':
        return { reply: { type: 'observation', data: await deps.actions.step(session.envForStep(), frame.data, 'ws', ['data'], log) } };
      case 'state':
        return { reply: { type: 'state', data: deps.actions.state(session.envForState()) } };
      case 'mcp':
        return { reply: { type: 'mcp', data: mcpReply(frame.data) } };
      case 'close':
        // OpenEnv answers a close request by closing the socket (1000), without a reply frame.
        return { close: true };
    }
  }
}

const TEXT_FRAME = { binary: false } as const;

function errorOutcome(deps: WsSessionDeps, data: ErrorFrameData): Outcome {
  deps.metrics.errorsTotal.inc({ code: data.code });
  return { reply: { type: 'error', data } };
}

/** Send a reply; one that would break the 1 MiB frame promise becomes an error frame instead. */
function send(ws: WebSocket, deps: WsSessionDeps, frame: ServerFrame): void {
  if (ws.readyState !== ws.OPEN) return;
  // Encoded once: ws sends a Buffer as is (a string would be measured and encoded again).
  const bytes = Buffer.from(JSON.stringify(frame));
  if (bytes.length > deps.maxFrameBytes) {
    deps.metrics.errorsTotal.inc({ code: WsErrorCode.EXECUTION_ERROR });
    const text = JSON.stringify({
      type: 'error',
      data: { message: `Reply of ${bytes.length} bytes exceeds the frame limit of ${deps.maxFrameBytes} bytes`, code: WsErrorCode.EXECUTION_ERROR },
    });
    ws.send(text);
    return;
  }
  // binary: false keeps it a text frame, as a string would be.
  ws.send(bytes, TEXT_FRAME);
}

/** Session-ending error: one frame, then close. */
function sendFinal(ws: WebSocket, deps: WsSessionDeps, data: ErrorFrameData, closeCode: number): void {
  deps.metrics.errorsTotal.inc({ code: data.code });
  if (ws.readyState !== ws.OPEN) return;
  ws.send(JSON.stringify({ type: 'error', data }), () => ws.close(closeCode));
}

function rejectSession(ws: WebSocket, deps: WsSessionDeps, error: unknown): void {
  const appError = toAppError(error);
  if (appError.code === ErrorCode.CAPACITY) {
    sendFinal(
      ws,
      deps,
      {
        message: appError.message,
        code: WsErrorCode.CAPACITY_REACHED,
        active_sessions: deps.registry.size,
        max_sessions: deps.registry.maxSessions,
      },
      CloseCode.NORMAL,
    );
    return;
  }
  const isFactory = appError.details?.['stage'] === 'factory';
  deps.logger.error({ err: appError }, isFactory ? 'environment factory failed' : 'ws session could not start');
  sendFinal(ws, deps, { message: appError.message, code: isFactory ? WsErrorCode.FACTORY_ERROR : WsErrorCode.SESSION_ERROR }, CloseCode.NORMAL);
}

/**
 * The registry ended this session: evicted (idle, and a new session needed its
 * slot) or server shutdown. Idle reaping alone never gets here for a
 * WebSocket: it only releases the episode and keeps the socket.
 */
function endSession(ws: WebSocket, deps: WsSessionDeps, reason: EndReason): void {
  if (reason === 'shutdown') {
    sendFinal(ws, deps, { message: 'Server shutting down', code: WsErrorCode.SESSION_ERROR }, CloseCode.GOING_AWAY);
    return;
  }
  const message = `Session closed: idle for more than ${deps.idleTimeoutS} s and its slot was needed by a new session; reconnect to start again`;
  sendFinal(ws, deps, { message, code: WsErrorCode.SESSION_ERROR }, CloseCode.NORMAL);
}

function rawSize(data: RawData): number {
  if (Array.isArray(data)) return data.reduce((n, b) => n + b.length, 0);
  return data instanceof ArrayBuffer ? data.byteLength : data.length;
}

/** Binary frames are read as UTF-8 JSON too: lenient, and still answered with INVALID_JSON if they are not. */
function rawText(data: RawData): string {
  if (Array.isArray(data)) return Buffer.concat(data).toString('utf8');
  return data instanceof ArrayBuffer ? Buffer.from(data).toString('utf8') : data.toString('utf8');
}
