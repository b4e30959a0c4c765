import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';
import { AppError, ErrorCode, silentLogger, formatZodIssues, type Logger } from '@sqlenv/shared';
import { isAuthorized, selectSubprotocol } from './auth.ts';
import { createHostPolicy, hostnameOf, type HostPolicy } from './host-policy.ts';
import { Catalog } from './catalog.ts';
import { EnvServerLimitsSchema, type EnvServerLimits, type EnvServerLimitsInput } from './config.ts';
import { EnvActions } from './env-actions.ts';
import type { ServedRuntime } from './env-runtime.ts';
import { registerHttpRoutes, type ServerMetadata } from './http-routes.ts';
import { buildOpenApiDocument } from './openapi.ts';
import { Router, sendJson } from './router.ts';
import { ServerMetrics } from './server-metrics.ts';
import { SessionRegistry } from './session-registry.ts';
import { registerWebRoutes } from './web-routes.ts';
import { serveWebSocket } from './ws-session.ts';

export interface EnvServerOptions extends EnvServerLimitsInput {
  /** The environments to serve (from createSqlEnvRuntime). */
  runtime: ServedRuntime;
  /** Close the runtime in close(); true when the server created it. Default false. */
  ownsRuntime?: boolean;
  logger?: Logger;
  /** Overrides of the /metadata document. */
  metadata?: Partial<ServerMetadata>;
  /** Register process metrics (RSS, event loop) in /metrics. Default true. */
  defaultMetrics?: boolean;
}

export interface EnvServer {
  /** Start listening; resolves with the bound address (port 0 picks a free port). Loopback unless told otherwise. */
  listen(port?: number, host?: string): Promise<AddressInfo>;
  /**
   * Graceful shutdown: stop accepting, let in-flight requests finish (up to
   * shutdownGraceMs), end every WebSocket session with an error frame
   * SESSION_ERROR "Server shutting down" and close code 1001, then close the
   * runtime if owned. Idempotent.
   */
  close(): Promise<void>;
  readonly metrics: ServerMetrics;
  readonly limits: EnvServerLimits;
  /** Sessions open now (WebSocket + HTTP). */
  sessionCount(): number;
}

const DEFAULT_METADATA: ServerMetadata = {
  name: 'sql_env',
  description: 'SQLEnv: answer questions about a SQL database by exploring it with DESCRIBE, SAMPLE, QUERY and ANSWER.',
  readme_content: null,
  version: '0.1.0',
  author: null,
  documentation_url: null,
};

/** The OpenEnv-compatible HTTP + WebSocket server over one environment runtime. */
export function createEnvServer(options: EnvServerOptions): EnvServer {
  const { runtime, ownsRuntime = false, logger: givenLogger, metadata, defaultMetrics, ...limitInput } = options;
  const parsedLimits = EnvServerLimitsSchema.safeParse(limitInput);
  if (!parsedLimits.success) throw new AppError(ErrorCode.VALIDATION, `invalid server options: ${formatZodIssues(parsedLimits.error)}`);
  const limits = parsedLimits.data;
  const logger = (givenLogger ?? silentLogger).child({ component: 'env-server' });
  const metrics = new ServerMetrics({ defaultMetrics: defaultMetrics ?? true });
  const catalog = new Catalog(runtime.dataset);
  const actions = new EnvActions(catalog, metrics);
  const registry = new SessionRegistry({
    runtime,
    maxSessions: limits.maxSessions,
    idleTimeoutS: limits.idleTimeoutS,
    onCountChange: (kind, delta) => metrics.sessionsActive.inc({ kind }, delta),
  });
  const meta: ServerMetadata = { ...DEFAULT_METADATA, ...metadata };

  const router = new Router();
  registerHttpRoutes(router, { registry, actions, runtime, metrics, metadata: meta, maxBodyBytes: limits.maxBodyBytes, logger });
  registerWebRoutes(router, {
    catalog,
    webEnabled: limits.web,
    openApiDocument: buildOpenApiDocument({ title: 'SQLEnv (OpenEnv-compatible)', version: meta.version ?? '0.1.0', description: meta.description, auth: limits.apiKey !== undefined }),
  });

  // Frames between maxFrameBytes and this hard cap get an error frame; beyond it ws drops the socket (1009).
  // Kept at a small multiple: every connection may buffer one frame this big.
  const hardMaxPayloadBytes = limits.maxFrameBytes * 4;
  const wss = new WebSocketServer({
    noServer: true,
    maxPayload: hardMaxPayloadBytes,
    perMessageDeflate: false,
    handleProtocols: (offered) => selectSubprotocol(offered),
  });
  const sockets = new Set<WebSocket>();
  let closing: Promise<void> | undefined;

  const hosts = createHostPolicy(limits.allowedHosts);
  const httpServer: Server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const refusal = hostRefusal(hosts, req, true);
    if (refusal !== undefined) {
      metrics.errorsTotal.inc({ code: 'HTTP_403' });
      logger.warn({ host: req.headers.host, origin: req.headers.origin, path: url.pathname }, 'request refused: host or origin not allowed');
      sendJson(res, 403, { detail: refusal });
      return;
    }
    if (!isAuthorized(req, url, limits.apiKey)) {
      metrics.errorsTotal.inc({ code: 'HTTP_401' });
      sendJson(res, 401, { detail: 'Missing or invalid bearer token' }, { 'www-authenticate': 'Bearer' });
      return;
    }
    router.dispatch({ req, res, url }).catch((error: unknown) => {
      logger.error({ err: error, path: url.pathname }, 'unhandled http error');
      if (!res.headersSent) sendJson(res, 500, { detail: 'Internal Server Error' });
      else res.destroy();
    });
  });
  // Slow-loris bodies and dead keep-alive sockets must not hold the process open forever.
  httpServer.requestTimeout = 60_000;
  httpServer.headersTimeout = 30_000;

  httpServer.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    const url = new URL(req.url ?? '/', 'http://localhost');
    if (closing !== undefined) return refuseUpgrade(socket, 503, 'Service Unavailable');
    if (url.pathname !== '/ws') return refuseUpgrade(socket, 404, 'Not Found');
    // Only browsers send Origin, and only they can be tricked into connecting; other clients chose their URL.
    if (hostRefusal(hosts, req, false) !== undefined) {
      metrics.errorsTotal.inc({ code: 'HTTP_403' });
      logger.warn({ host: req.headers.host, origin: req.headers.origin }, 'websocket refused: origin not allowed');
      return refuseUpgrade(socket, 403, 'Forbidden');
    }
    if (!isAuthorized(req, url, limits.apiKey)) {
      metrics.errorsTotal.inc({ code: 'HTTP_401' });
      return refuseUpgrade(socket, 401, 'Unauthorized');
    }
    wss.handleUpgrade(req, socket, head, (ws) => {
      sockets.add(ws);
      ws.on('close', () => sockets.delete(ws));
      serveWebSocket(ws, {
        registry,
        actions,
        metrics,
        logger,
        maxFrameBytes: limits.maxFrameBytes,
        maxQueuedRequests: limits.maxQueuedRequests,
        idleTimeoutS: limits.idleTimeoutS,
      });
    });
  });

  async function shutdown(): Promise<void> {
    logger.info({ sessions: registry.size }, 'env server shutting down');
    const serverClosed = new Promise<void>((resolve) => httpServer.close(() => resolve()));
    httpServer.closeIdleConnections();
    await drainSessions(registry, limits.shutdownGraceMs);
    registry.endAll('shutdown');
    registry.stop();
    await waitForSockets(sockets, 2_000);
    httpServer.closeAllConnections();
    await serverClosed;
    wss.close();
    if (ownsRuntime) await runtime.close();
    logger.info('env server closed');
  }

  return {
    metrics,
    limits,
    sessionCount: () => registry.size,
    listen(port = 8000, host = '127.0.0.1') {
      return new Promise<AddressInfo>((resolve, reject) => {
        httpServer.once('error', reject);
        httpServer.listen(port, host, () => {
          httpServer.off('error', reject);
          const address = httpServer.address() as AddressInfo;
          logger.info(
            {
              host: address.address,
              port: address.port,
              maxSessions: limits.maxSessions,
              auth: limits.apiKey !== undefined,
              allowedHosts: limits.allowedHosts,
              rewardMode: runtime.config?.rewardMode ?? 'unknown',
            },
            'env server listening',
          );
          resolve(address);
        });
      });
    },
    close() {
      closing ??= shutdown();
      return closing;
    },
  };
}

/**
 * Why a request is refused by the host policy, or undefined when it may pass.
 * HTTP requests need an accepted Host; both HTTP and WebSocket need an
 * accepted Origin when a browser sent one.
 */
function hostRefusal(hosts: HostPolicy, req: IncomingMessage, checkHost: boolean): string | undefined {
  const host = req.headers.host;
  if (checkHost && !hosts.allowsHost(host)) {
    return `Host '${host ?? ''}' is not allowed: start the server with --allowed-hosts ${hostnameOf(host ?? '') ?? '<name>'} (or SQLENV_ALLOWED_HOSTS) to serve it`;
  }
  const origin = req.headers.origin;
  if (!hosts.allowsOrigin(origin, host)) {
    return `Origin '${origin ?? ''}' is not allowed: start the server with --allowed-hosts <its host name> (or SQLENV_ALLOWED_HOSTS) to accept its pages`;
  }
  return undefined;
}

function refuseUpgrade(socket: Duplex, status: number, reason: string): void {
  const extra = status === 401 ? 'WWW-Authenticate: Bearer\r\n' : '';
  socket.end(`HTTP/1.1 ${status} ${reason}\r\nConnection: close\r\n${extra}Content-Length: 0\r\n\r\n`);
}

/** Wait until no session has queued work, or the grace period ends. */
async function drainSessions(registry: SessionRegistry, graceMs: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, graceMs);
  });
  await Promise.race([registry.drainAll(), deadline]);
  clearTimeout(timer);
}

/** Wait for the sockets to finish their closing handshakes, then cut the stragglers. */
async function waitForSockets(sockets: Set<WebSocket>, timeoutMs: number): Promise<void> {
  const pending = [...sockets].map((ws) => new Promise<void>((resolve) => (ws.readyState === ws.CLOSED ? resolve() : ws.once('close', () => resolve()))));
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([Promise.all(pending), new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs)))]);
  clearTimeout(timer);
  for (const ws of sockets) ws.terminate();
}
