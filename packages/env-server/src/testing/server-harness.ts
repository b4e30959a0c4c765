import WebSocket from 'ws';
import { createEnvServer, type EnvServer, type EnvServerOptions } from '../env-server.ts';
import type { ServedRuntime } from '../env-runtime.ts';

/** A server on a free loopback port, for tests. */
export interface Harness {
  server: EnvServer;
  baseUrl: string;
  wsUrl: string;
  close(): Promise<void>;
}

export async function startHarness(runtime: ServedRuntime, options: Omit<EnvServerOptions, 'runtime'> = {}): Promise<Harness> {
  // Process metrics (intervals, event-loop monitor) stay off: tests create many servers.
  const server = createEnvServer({ runtime, defaultMetrics: false, ...options });
  const address = await server.listen(0, '127.0.0.1');
  const baseUrl = `http://127.0.0.1:${address.port}`;
  return { server, baseUrl, wsUrl: `ws://127.0.0.1:${address.port}/ws`, close: () => server.close() };
}

export interface CloseEvent {
  code: number;
  reason: string;
}

/** A raw WebSocket that records every frame, for protocol tests (sends anything, parses nothing for you). */
export class RawWs {
  readonly ws: WebSocket;
  readonly closed: Promise<CloseEvent>;
  private readonly frames: unknown[] = [];
  private waiters: ((frame: unknown) => void)[] = [];

  private constructor(ws: WebSocket) {
    this.ws = ws;
    this.closed = new Promise((resolve) => ws.once('close', (code, reason) => resolve({ code, reason: reason.toString('utf8') })));
    ws.on('message', (data: WebSocket.RawData) => {
      const frame: unknown = JSON.parse(Buffer.from(data as Buffer).toString('utf8'));
      const waiter = this.waiters.shift();
      if (waiter !== undefined) waiter(frame);
      else this.frames.push(frame);
    });
  }

  static open(url: string, options: { headers?: Record<string, string>; protocols?: string[] } = {}): Promise<RawWs> {
    const ws = new WebSocket(url, options.protocols ?? [], { headers: options.headers ?? {}, maxPayload: 64 * 1024 * 1024 });
    const raw = new RawWs(ws);
    return new Promise((resolve, reject) => {
      ws.once('open', () => resolve(raw));
      ws.once('unexpected-response', (_req, res) => reject(new Error(`HTTP ${res.statusCode ?? 0}`)));
      ws.once('error', reject);
    });
  }

  send(frame: unknown): void {
    this.ws.send(typeof frame === 'string' ? frame : JSON.stringify(frame));
  }

  /** The next frame, or an error after `timeoutMs`. */
  next(timeoutMs = 10_000): Promise<Record<string, unknown>> {
    const queued = this.frames.shift();
    if (queued !== undefined) return Promise.resolve(queued as Record<string, unknown>);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no frame within ${timeoutMs} ms`)), timeoutMs);
      this.waiters.push((frame) => {
        clearTimeout(timer);
        resolve(frame as Record<string, unknown>);
      });
    });
  }

  async request(frame: unknown, timeoutMs?: number): Promise<Record<string, unknown>> {
    this.send(frame);
    return this.next(timeoutMs);
  }

  get isOpen(): boolean {
    return this.ws.readyState === WebSocket.OPEN;
  }

  close(): void {
    this.ws.close();
  }
}

/** Resolves once `condition()` holds, checking every 20 ms; rejects after `timeoutMs`. */
export async function waitUntil(condition: () => boolean, timeoutMs = 5_000): Promise<void> {
  const start = Date.now();
  while (!condition()) {
    if (Date.now() - start > timeoutMs) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
