import { isIP } from 'node:net';

/**
 * Which Host headers and browser Origins the server answers: the defence
 * against DNS rebinding and against web pages driving a local server.
 *
 * - A page on evil.example whose name is re-pointed at 127.0.0.1 reaches the
 *   server with `Host: evil.example:8000`: refused unless that name is
 *   allowed. Loopback names cannot be re-pointed by a remote attacker, and an
 *   IP literal involves no name to re-point, so both are always accepted.
 * - A page on another origin that posts to http://127.0.0.1:8000 carries its
 *   own `Origin`: refused unless its host is a loopback or configured name, or
 *   it is the server's own origin (same host and port as an accepted Host
 *   header: /web opened by IP). Any other IP-literal origin is someone else's page.
 * - Clients that send no Origin (the OpenEnv Python client, TRL, curl, the
 *   TypeScript client) are not browsers, so only the Host check applies to
 *   them, and on WebSocket handshakes not even that: they choose their URL.
 */
export interface HostPolicy {
  /** True when a request with this Host header may be served. */
  allowsHost(hostHeader: string | undefined): boolean;
  /** True when a request with this Origin (undefined = none sent) and Host header may be served. */
  allowsOrigin(origin: string | undefined, hostHeader: string | undefined): boolean;
}

/** `Example.COM.:8000` → `example.com`; `[::1]:80` → `::1`; undefined when unparseable. */
export function hostnameOf(host: string): string | undefined {
  const trimmed = host.trim().toLowerCase();
  if (trimmed === '') return undefined;
  let name: string;
  if (trimmed.startsWith('[')) {
    const end = trimmed.indexOf(']');
    if (end < 0) return undefined;
    name = trimmed.slice(1, end);
  } else {
    const colon = trimmed.indexOf(':');
    // Host headers carry IPv6 only in brackets; a second colon means garbage.
    if (colon >= 0 && trimmed.indexOf(':', colon + 1) >= 0) return undefined;
    name = colon >= 0 ? trimmed.slice(0, colon) : trimmed;
  }
  return name.endsWith('.') ? name.slice(0, -1) : name;
}

/** Names only this machine answers to (RFC 6761 reserves .localhost; browsers resolve it to loopback themselves). */
function isLoopback(hostname: string): boolean {
  if (hostname === 'localhost' || hostname.endsWith('.localhost') || hostname === '::1') return true;
  return isIP(hostname) === 4 && hostname.startsWith('127.');
}

/**
 * Build the policy from the configured names (EnvServerLimits.allowedHosts):
 * `name` matches that host, `.name` matches it and its subdomains, `*` matches
 * anything. Ports are ignored (any port matches).
 */
export function createHostPolicy(allowedHosts: readonly string[]): HostPolicy {
  const allowAll = allowedHosts.includes('*');
  const exact = new Set<string>();
  const suffixes: string[] = [];
  for (const entry of allowedHosts) {
    if (entry === '*') continue;
    const dotted = entry.startsWith('.');
    const name = hostnameOf(dotted ? entry.slice(1) : entry);
    if (name === undefined) continue;
    exact.add(name);
    if (dotted) suffixes.push(`.${name}`);
  }
  const configured = (hostname: string): boolean => exact.has(hostname) || suffixes.some((suffix) => hostname.endsWith(suffix));

  const allowsHost = (hostHeader: string | undefined): boolean => {
    // HTTP/1.0 without Host: no browser sends that.
    if (allowAll || hostHeader === undefined) return true;
    const hostname = hostnameOf(hostHeader);
    // An IP literal names no DNS record an attacker could re-point; a page's origin is another matter (below).
    return hostname !== undefined && (isLoopback(hostname) || isIP(hostname) !== 0 || configured(hostname));
  };

  return {
    allowsHost,
    allowsOrigin(origin, hostHeader) {
      if (allowAll || origin === undefined) return true;
      let url: URL;
      try {
        url = new URL(origin);
      } catch {
        // Includes `null`: sandboxed frames and file:// pages get no say.
        return false;
      }
      if (url.protocol !== 'http:' && url.protocol !== 'https:') return false;
      const hostname = hostnameOf(url.host);
      if (hostname === undefined) return false;
      if (isLoopback(hostname) || configured(hostname)) return true;
      // The server's own pages (/web, /docs) opened by an allowed Host, e.g. an IP literal.
      return hostHeader !== undefined && url.host === hostHeader.trim().toLowerCase() && allowsHost(hostHeader);
    },
  };
}
