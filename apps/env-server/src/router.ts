import type { IncomingMessage, ServerResponse } from 'node:http';
import { readJsonBody as readSharedJsonBody, sendJson, sendText } from '@sqlenv/shared';

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

export { sendJson, sendText };

export type BodyResult = { ok: true; value: unknown } | { ok: false; status: number; detail: unknown };

/**
 * Read a JSON body of at most `maxBytes` (@sqlenv/shared `readJsonBody`), failures in this server's
 * shape. An empty body reads as `undefined` (OpenEnv's /reset body is optional).
 */
export async function readJsonBody(req: IncomingMessage, maxBytes: number): Promise<BodyResult> {
  const body = await readSharedJsonBody(req, maxBytes);
  if (body.ok) return body;
  if (body.status === 413) return { ok: false, status: 413, detail: body.message };
  return { ok: false, status: 422, detail: [{ loc: ['body'], msg: body.message, type: 'json_invalid' }] };
}
