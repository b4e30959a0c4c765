import type { IncomingMessage, ServerResponse } from 'node:http';

/**
 * A deliberately tiny router over node:http: exact method + path matches,
 * JSON helpers and a size-capped body reader. Enough for a dozen routes
 * without a framework's per-request overhead.
 */
export interface RequestContext {
  req: IncomingMessage;
  res: ServerResponse;
  url: URL;
}

export type RouteHandler = (ctx: RequestContext) => Promise<void> | void;

export class Router {
  private readonly routes = new Map<string, RouteHandler>();
  private readonly paths = new Map<string, Set<string>>();

  add(method: 'GET' | 'POST', path: string, handler: RouteHandler): this {
    this.routes.set(`${method} ${path}`, handler);
    const methods = this.paths.get(path) ?? new Set<string>();
    methods.add(method);
    this.paths.set(path, methods);
    return this;
  }

  /** Dispatch; answers 404 / 405 itself when nothing matches. */
  async dispatch(ctx: RequestContext): Promise<void> {
    const method = ctx.req.method === 'HEAD' ? 'GET' : (ctx.req.method ?? 'GET');
    const handler = this.routes.get(`${method} ${ctx.url.pathname}`);
    if (handler !== undefined) {
      await handler(ctx);
      return;
    }
    const allowed = this.paths.get(ctx.url.pathname);
    if (allowed !== undefined) {
      sendJson(ctx.res, 405, { detail: 'Method Not Allowed' }, { allow: [...allowed].join(', ') });
      return;
    }
    sendJson(ctx.res, 404, { detail: 'Not Found' });
  }
}

export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const payload = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(payload),
    ...headers,
  });
  res.end(payload);
}

export function sendText(res: ServerResponse, status: number, contentType: string, body: string | Buffer, headers: Record<string, string> = {}): void {
  res.writeHead(status, {
    'content-type': contentType,
    'content-length': Buffer.byteLength(body),
    ...headers,
  });
  res.end(body);
}

export type BodyResult = { ok: true; value: unknown } | { ok: false; status: number; detail: unknown };

/**
 * Read a JSON body of at most `maxBytes`. An empty body reads as `undefined`
 * (OpenEnv's /reset body is optional). Oversized bodies stop being read as
 * soon as the limit is crossed.
 */
export function readJsonBody(req: IncomingMessage, maxBytes: number): Promise<BodyResult> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > maxBytes) {
    return Promise.resolve({ ok: false, status: 413, detail: `Request body of ${declared} bytes exceeds the limit of ${maxBytes} bytes` });
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let sizeBytes = 0;
    let done = false;
    req.on('data', (chunk: Buffer) => {
      if (done) return;
      sizeBytes += chunk.length;
      if (sizeBytes > maxBytes) {
        done = true;
        resolve({ ok: false, status: 413, detail: `Request body exceeds the limit of ${maxBytes} bytes` });
        // Stop buffering but drain the rest so the 413 can still be written on this connection.
        req.resume();
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => {
      if (done) return;
      done = true;
      const text = Buffer.concat(chunks).toString('utf8');
      if (text.trim() === '') {
        resolve({ ok: true, value: undefined });
        return;
      }
      try {
        resolve({ ok: true, value: JSON.parse(text) as unknown });
      } catch (error) {
        resolve({
          ok: false,
          status: 422,
          detail: [{ loc: ['body'], msg: `Invalid JSON: ${error instanceof Error ? error.message : String(error)}`, type: 'json_invalid' }],
        });
      }
    });
    req.on('error', (error) => {
      if (done) return;
      done = true;
      reject(error);
    });
  });
}
