import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';
import { silentLogger, type Logger } from '@sqlenv/shared';
import type { HealthReport } from './health.ts';

export interface StatusServerOptions {
  /** 0 picks a free port. */
  port: number;
  host: string;
  registry: Registry;
  /** The app's run status, served as JSON on /status. */
  status: () => Promise<unknown> | unknown;
  /** Backs `/healthz`: 200 when `ok`, 503 otherwise, the report as JSON. Without it `/healthz` only says the loop answered. */
  health?: () => Promise<HealthReport>;
  logger?: Logger;
}

export interface StatusServer {
  readonly port: number;
  close(): Promise<void>;
}

/** `/metrics` (Prometheus text), `/status` (JSON), `/healthz` (createHealthCheck) — one per app, on `--metrics-port`. */
export async function startStatusServer(options: StatusServerOptions): Promise<StatusServer> {
  const logger = options.logger ?? silentLogger;
  const server: Server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const reply = (code: number, type: string, body: string): void => {
      res.writeHead(code, { 'content-type': type });
      res.end(body);
    };
    const handle = async (): Promise<void> => {
      if (req.method !== 'GET') return reply(405, 'text/plain', 'method not allowed\n');
      if (url.pathname === '/metrics') return reply(200, options.registry.contentType, await options.registry.metrics());
      if (url.pathname === '/status') return reply(200, 'application/json', `${JSON.stringify(await options.status())}\n`);
      if (url.pathname === '/healthz') {
        if (!options.health) return reply(200, 'text/plain', 'ok\n');
        const report = await options.health();
        return reply(report.ok ? 200 : 503, 'application/json', `${JSON.stringify(report)}\n`);
      }
      return reply(404, 'text/plain', 'not found\n');
    };
    handle().catch((error: unknown) => {
      logger.warn({ err: error, path: url.pathname }, 'status request failed');
      if (!res.headersSent) reply(500, 'text/plain', 'internal error\n');
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  logger.info({ port }, 'status server listening');
  let closing: Promise<void> | undefined;
  return {
    port,
    close: () => {
      closing ??= new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      });
      return closing;
    },
  };
}
