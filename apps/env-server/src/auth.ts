import type { IncomingMessage } from 'node:http';
import { bearerToken, tokenMatches } from '@sqlenv/shared';

/**
 * Bearer-token auth. Clients that can set headers send `Authorization: Bearer
 * <key>`; a browser cannot set headers on a WebSocket, so the /web page may
 * pass `?api_key=<key>` in the URL or offer the subprotocol
 * `sqlenv.bearer.<key>` (key made of token characters) next to `sqlenv`.
 */
export const BEARER_SUBPROTOCOL_PREFIX = 'sqlenv.bearer.';
/** The subprotocol the server selects when a browser offers subprotocols. */
export const SQLENV_SUBPROTOCOL = 'sqlenv';

export { tokenMatches };

/** Every token the request presents, from header, query string and subprotocols. */
export function presentedTokens(req: IncomingMessage, url: URL): string[] {
  const tokens: string[] = [];
  const header = bearerToken(req);
  if (header !== undefined) tokens.push(header);
  const query = url.searchParams.get('api_key');
  if (query !== null) tokens.push(query);
  const protocols = req.headers['sec-websocket-protocol'];
  if (typeof protocols === 'string') {
    for (const p of protocols.split(',')) {
      const trimmed = p.trim();
      if (trimmed.startsWith(BEARER_SUBPROTOCOL_PREFIX)) tokens.push(trimmed.slice(BEARER_SUBPROTOCOL_PREFIX.length));
    }
  }
  return tokens;
}

/** True when no key is configured or any presented token matches it. */
export function isAuthorized(req: IncomingMessage, url: URL, apiKey: string | undefined): boolean {
  if (apiKey === undefined) return true;
  return presentedTokens(req, url).some((t) => tokenMatches(t, apiKey));
}

/**
 * Pick the subprotocol to answer with: browsers fail the handshake if they
 * offered some and none is selected. Prefer `sqlenv` so the key is never
 * echoed back in the response headers.
 */
export function selectSubprotocol(offered: ReadonlySet<string>): string | false {
  if (offered.has(SQLENV_SUBPROTOCOL)) return SQLENV_SUBPROTOCOL;
  const first = offered.values().next();
  return first.done === true ? false : first.value;
}
