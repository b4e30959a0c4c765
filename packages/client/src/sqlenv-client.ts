import WebSocket from 'ws';
import { z } from 'zod';
import { AppError, ErrorCode, formatZodIssues } from '@sqlenv/shared';
import {
  ServerFrameSchema,
  type EpisodeState,
  type JsonRpcResponse,
  type ResetOptions,
  type ServerFrame,
  type SqlAction,
  type StepResult,
} from '@sqlenv/protocol';
import { appErrorFromFrame } from './error-frames.ts';
import { toWebSocketUrl } from './ws-url.ts';
import { fastObservationFrame } from './fast-frame.ts';

export const SQLEnvClientOptionsSchema = z.strictObject({
  /** Sent as `Authorization: Bearer <apiKey>` on the WebSocket handshake. */
  apiKey: z.string().min(1).optional(),
  /** A request (reset/step/state/mcp) with no reply by then rejects with AppError TIMEOUT. Milliseconds. */
  requestTimeoutMs: z.number().int().positive().default(60_000),
  /** Handshake time limit. Milliseconds. */
  connectTimeoutMs: z.number().int().positive().default(10_000),
  /** Largest reply frame accepted (the server keeps frames under 1 MiB). Bytes. */
  maxFrameBytes: z.number().int().positive().default(4 * 1024 * 1024),
  /** Extra handshake headers. */
  headers: z.record(z.string(), z.string()).default({}),
  /**
   * When reset() finds the connection closed (the server evicted an idle
   * session, restarted, or the network dropped it), open a new one and reset
   * there. Other calls never reconnect: the episode they belong to is gone.
   */
  reconnect: z.boolean().default(true),
});
export type SQLEnvClientOptions = z.input<typeof SQLEnvClientOptionsSchema>;
type ParsedOptions = z.infer<typeof SQLEnvClientOptionsSchema>;

/** Reset kwargs: the known options plus anything else the server accepts (OpenEnv passes extras through). */
export type ResetRequest = ResetOptions & Record<string, unknown>;

/**
 * The remote counterpart of an in-process SqlEnvironment, for code that runs
 * episodes against a server (evaluate(), scripts). Differences, by necessity:
 * `state()` and `close()` are async, and `step()` returns the wire
 * StepResult only — the reward breakdown and `info` never leave the server.
 */
export interface RemoteEnvironment {
  reset(options?: ResetRequest): Promise<StepResult>;
  step(action: SqlAction): Promise<StepResult>;
  state(): Promise<EpisodeState>;
  close(): Promise<void>;
}

interface Pending {
  resolve: (frame: ServerFrame) => void;
  reject: (error: AppError) => void;
  timer: NodeJS.Timeout | undefined;
  /** Timed out: the reply will still come (one per request) and must be skipped, not matched to the next request. */
  abandoned: boolean;
}

/**
 * One WebSocket connection = one server session. Replies are matched to
 * requests in order (the server answers each request exactly once, in order),
 * so calls may be pipelined.
 */
class Connection {
  readonly ws: WebSocket;
  private readonly options: ParsedOptions;
  private readonly queue: Pending[] = [];
  /** Set once the session is over; every later request rejects with it. */
  ended: AppError | undefined;
  readonly closed: Promise<void>;

  private constructor(ws: WebSocket, options: ParsedOptions) {
    this.ws = ws;
    this.options = options;
    this.closed = new Promise((resolve) => ws.once('close', () => resolve()));
    ws.on('message', (data: WebSocket.RawData) => this.onMessage(data));
    ws.on('close', (code: number, reason: Buffer) => {
      const why = reason.length > 0 ? `: ${reason.toString('utf8')}` : '';
      this.fail(this.ended ?? new AppError(ErrorCode.TRANSPORT, `connection closed (code ${code}${why})`, { details: { closeCode: code } }));
    });
    ws.on('error', () => undefined); // 'close' follows and carries the failure
  }

  /** Rejects with AppError UNAUTHORIZED (401), TRANSPORT (unreachable, refused) or TIMEOUT. */
  static async open(wsUrl: string, opts: ParsedOptions): Promise<Connection> {
    const headers: Record<string, string> = { ...opts.headers };
    if (opts.apiKey !== undefined) headers['authorization'] = `Bearer ${opts.apiKey}`;
    const ws = new WebSocket(wsUrl, { headers, maxPayload: opts.maxFrameBytes, perMessageDeflate: false, handshakeTimeout: opts.connectTimeoutMs });
    // Listeners go on before 'open': a server at capacity sends its error frame right behind the handshake.
    const connection = new Connection(ws, opts);
    await new Promise<void>((resolve, reject) => {
      const settle = (error?: AppError): void => {
        ws.off('open', onOpen);
        ws.off('error', onError);
        ws.off('unexpected-response', onUnexpected);
        if (error === undefined) resolve();
        else reject(error);
      };
      const onOpen = (): void => settle();
      const onError = (error: Error): void => {
        const timedOut = /timed out/i.test(error.message);
        settle(new AppError(timedOut ? ErrorCode.TIMEOUT : ErrorCode.TRANSPORT, `cannot connect to ${wsUrl}: ${error.message}`, { cause: error }));
      };
      const onUnexpected = (_req: unknown, res: { statusCode?: number }): void => {
        const status = res.statusCode ?? 0;
        settle(
          new AppError(status === 401 ? ErrorCode.UNAUTHORIZED : ErrorCode.TRANSPORT, `handshake with ${wsUrl} refused: HTTP ${status}`, {
            details: { status },
          }),
        );
        ws.terminate();
      };
      ws.on('open', onOpen);
      ws.on('error', onError);
      ws.on('unexpected-response', onUnexpected);
    });
    return connection;
  }

  /** Open and not ended by the server (an unsolicited error frame arrives just before its close). */
  get isUsable(): boolean {
    return this.ended === undefined && this.ws.readyState === WebSocket.OPEN;
  }

  request(frame: Record<string, unknown>, expect: ServerFrame['type'] | undefined): Promise<ServerFrame> {
    if (this.ended !== undefined) return Promise.reject(this.ended);
    if (this.ws.readyState !== WebSocket.OPEN) return Promise.reject(new AppError(ErrorCode.TRANSPORT, 'connection is not open'));
    return new Promise<ServerFrame>((resolve, reject) => {
      const entry: Pending = {
        resolve: (reply) => {
          if (expect !== undefined && reply.type !== 'error' && reply.type !== expect) {
            reject(new AppError(ErrorCode.TRANSPORT, `expected a '${expect}' reply, got '${reply.type}'`));
            return;
          }
          if (expect !== undefined && reply.type === 'error') {
            reject(appErrorFromFrame(reply.data));
            return;
          }
          resolve(reply);
        },
        reject,
        timer: undefined,
        abandoned: false,
      };
      entry.timer = setTimeout(() => {
        entry.abandoned = true;
        reject(new AppError(ErrorCode.TIMEOUT, `no reply to '${String(frame['type'])}' within ${this.options.requestTimeoutMs} ms`));
      }, this.options.requestTimeoutMs);
      this.queue.push(entry);
      this.ws.send(JSON.stringify(frame));
    });
  }

  /** `{"type":"close"}`, then wait for the server to close the socket. Idempotent. */
  async close(): Promise<void> {
    if (this.ws.readyState === WebSocket.OPEN && this.ended === undefined) {
      this.ended = new AppError(ErrorCode.TRANSPORT, 'client closed');
      this.ws.send(JSON.stringify({ type: 'close' }));
      // A server that ignores the close frame must not hang us.
      const timer = setTimeout(() => this.ws.terminate(), this.options.connectTimeoutMs);
      await this.closed;
      clearTimeout(timer);
      return;
    }
    if (this.ws.readyState !== WebSocket.CLOSED) this.ws.terminate();
    await this.closed;
  }

  private onMessage(data: WebSocket.RawData): void {
    let frame: ServerFrame;
    try {
      const text = Array.isArray(data) ? Buffer.concat(data).toString('utf8') : Buffer.isBuffer(data) ? data.toString('utf8') : Buffer.from(data).toString('utf8');
      const json: unknown = JSON.parse(text);
      // Observation replies (every reset and step) take a precompiled check with the schema's verdict; the rest go through zod.
      const fast = fastObservationFrame(json);
      if (fast !== undefined) {
        frame = fast;
      } else {
        const parsed = ServerFrameSchema.safeParse(json);
        if (!parsed.success) throw new Error(formatZodIssues(parsed.error));
        frame = parsed.data;
      }
    } catch (error) {
      // A reply we cannot read breaks the one-reply-per-request pairing: end the session loudly.
      this.ended = new AppError(ErrorCode.TRANSPORT, `unreadable frame from server: ${error instanceof Error ? error.message : String(error)}`);
      this.ws.terminate();
      return;
    }
    const entry = this.queue.shift();
    if (entry === undefined) {
      // Unsolicited: the server ends the session (CAPACITY_REACHED, eviction, shutdown); the close follows.
      if (frame.type === 'error') this.ended = appErrorFromFrame(frame.data);
      return;
    }
    clearTimeout(entry.timer);
    if (!entry.abandoned) entry.resolve(frame);
  }

  private fail(error: AppError): void {
    this.ended ??= error;
    for (const entry of this.queue.splice(0)) {
      clearTimeout(entry.timer);
      if (!entry.abandoned) entry.reject(error);
    }
  }
}

/**
 * OpenEnv WebSocket client for the SQLEnv server: one connection = one
 * environment session. Every reply is parsed with the shared zod schemas;
 * server error frames become AppErrors (CAPACITY, VALIDATION, EPISODE_STATE,
 * ...), a dropped connection TRANSPORT, a late reply TIMEOUT.
 *
 * When the server closes the connection (an idle session evicted to make room,
 * a restart), the next reset() reconnects and starts the episode there; a
 * step(), state() or mcp() in between fails with EPISODE_STATE instead of
 * silently running on a fresh session: the episode it belonged to is gone.
 */
export class SQLEnvClient implements RemoteEnvironment {
  readonly url: string;
  private readonly options: ParsedOptions;
  private connection: Connection;
  private reconnecting: Promise<Connection> | undefined;
  /** Set by close(): the client is done, nothing reconnects. */
  private closedByUser: AppError | undefined;
  private reconnectCount = 0;

  private constructor(url: string, connection: Connection, options: ParsedOptions) {
    this.url = url;
    this.connection = connection;
    this.options = options;
  }

  /**
   * Open a session. `url` may be the server's base URL (`http://host:8000`,
   * like OpenEnv's base_url) or a ws:// URL; `/ws` is appended when missing.
   * Rejects with AppError UNAUTHORIZED (401), TRANSPORT (unreachable) or TIMEOUT.
   */
  static async connect(url: string, options: SQLEnvClientOptions = {}): Promise<SQLEnvClient> {
    const parsed = SQLEnvClientOptionsSchema.safeParse(options);
    if (!parsed.success) throw new AppError(ErrorCode.VALIDATION, `invalid client options: ${formatZodIssues(parsed.error)}`);
    const wsUrl = toWebSocketUrl(url);
    return new SQLEnvClient(wsUrl, await Connection.open(wsUrl, parsed.data), parsed.data);
  }

  get isOpen(): boolean {
    return this.closedByUser === undefined && this.connection.isUsable;
  }

  /** How many times reset() had to open a new connection. */
  get reconnects(): number {
    return this.reconnectCount;
  }

  async reset(options: ResetRequest = {}): Promise<StepResult> {
    const connection = await this.connectionForReset();
    const frame = await connection.request({ type: 'reset', data: options }, 'observation');
    return (frame as Extract<ServerFrame, { type: 'observation' }>).data;
  }

  async step(action: SqlAction): Promise<StepResult> {
    const frame = await this.episodeConnection().request({ type: 'step', data: action }, 'observation');
    return (frame as Extract<ServerFrame, { type: 'observation' }>).data;
  }

  async state(): Promise<EpisodeState> {
    const frame = await this.episodeConnection().request({ type: 'state' }, 'state');
    return (frame as Extract<ServerFrame, { type: 'state' }>).data;
  }

  /** Send a JSON-RPC request over the `mcp` frame (this server answers -32603: no MCP). */
  async mcp(request: { method: string; id?: string | number; params?: unknown }): Promise<JsonRpcResponse> {
    const frame = await this.episodeConnection().request({ type: 'mcp', data: { jsonrpc: '2.0', ...request } }, 'mcp');
    return (frame as Extract<ServerFrame, { type: 'mcp' }>).data;
  }

  /** End the session: `{"type":"close"}`, then wait for the server to close the socket. Idempotent. */
  async close(): Promise<void> {
    this.closedByUser ??= new AppError(ErrorCode.TRANSPORT, 'client closed');
    // A reconnect under way finishes first, so its socket is closed too.
    if (this.reconnecting !== undefined) await this.reconnecting.catch(() => undefined);
    await this.connection.close();
  }

  /** Raw send, for protocol tests: the reply (whatever its type) is returned parsed. Never reconnects. */
  async send(frame: Record<string, unknown>): Promise<ServerFrame> {
    return this.episodeConnection().request(frame, undefined);
  }

  /** The connection a step/state belongs to; EPISODE_STATE once the server closed it (its episode is gone). */
  private episodeConnection(): Connection {
    if (this.closedByUser !== undefined) throw this.closedByUser;
    const connection = this.connection;
    if (connection.isUsable || connection.ended === undefined || !this.options.reconnect) return connection;
    const lost = connection.ended;
    throw new AppError(ErrorCode.EPISODE_STATE, `the session ended (${lost.message}): its episode is gone; call reset() to start a new one`, {
      cause: lost,
      details: { lostCode: lost.code },
    });
  }

  /** The open connection, or a new one when the server closed the old (one reconnect shared by concurrent resets). */
  private async connectionForReset(): Promise<Connection> {
    if (this.closedByUser !== undefined) throw this.closedByUser;
    if (this.connection.isUsable || !this.options.reconnect) return this.connection;
    this.reconnecting ??= (async () => {
      try {
        const old = this.connection;
        // The server may have sent its last frame without closing yet: do not leave the old socket behind.
        void old.close();
        const fresh = await Connection.open(this.url, this.options);
        this.connection = fresh;
        this.reconnectCount += 1;
        return fresh;
      } finally {
        this.reconnecting = undefined;
      }
    })();
    const connection = await this.reconnecting;
    if (this.closedByUser !== undefined) {
      await connection.close();
      throw this.closedByUser;
    }
    return connection;
  }
}
