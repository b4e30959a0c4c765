import { AppError, ErrorCode } from '@sqlenv/shared';

/**
 * The session URL for a server address, as OpenEnv's client derives it:
 * http → ws, https → wss, then `/ws` appended (unless the path already ends
 * with it). Query strings (e.g. `?api_key=`) are kept.
 */
export function toWebSocketUrl(base: string): string {
  let url: URL;
  try {
    url = new URL(base);
  } catch (cause) {
    throw new AppError(ErrorCode.VALIDATION, `invalid server URL '${base}'`, { cause });
  }
  const schemes: Record<string, string> = { 'http:': 'ws:', 'https:': 'wss:', 'ws:': 'ws:', 'wss:': 'wss:' };
  const scheme = schemes[url.protocol];
  if (scheme === undefined) throw new AppError(ErrorCode.VALIDATION, `unsupported URL scheme '${url.protocol}' in '${base}' (use http, https, ws or wss)`);
  url.protocol = scheme;
  // A scan, not /\/+$/ (which retries from every slash of a long run).
  let end = url.pathname.length;
  while (end > 0 && url.pathname[end - 1] === '/') end -= 1;
  const path = url.pathname.slice(0, end);
  url.pathname = path.endsWith('/ws') ? path : `${path}/ws`;
  return url.toString();
}
