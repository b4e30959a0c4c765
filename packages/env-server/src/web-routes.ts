import { readFileSync } from 'node:fs';
import type { ServerResponse } from 'node:http';
import type { Catalog } from './catalog.ts';
import { sendJson, sendText, type Router } from './router.ts';

/**
 * Read a page from ./web and inline its script and stylesheet, so each page is
 * ONE self-contained document: no CDN, no build step, and no second request
 * that would need the api key again.
 */
function loadPage(htmlFile: string, inlines: Record<string, string>): string {
  let html = readFileSync(new URL(`./web/${htmlFile}`, import.meta.url), 'utf8');
  for (const [marker, file] of Object.entries(inlines)) {
    // A function replacement keeps `$&`-like sequences in the asset text literal.
    const asset = readFileSync(new URL(`./web/${file}`, import.meta.url), 'utf8');
    html = html.replace(marker, () => asset);
  }
  return html;
}

const htmlHeaders = {
  'cache-control': 'no-cache',
  // The pages only talk to their own origin (fetch + WebSocket); inline code is the page itself.
  'content-security-policy': "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'",
  'x-content-type-options': 'nosniff',
};

export interface WebRouteDeps {
  catalog: Catalog;
  openApiDocument: Record<string, unknown>;
  webEnabled: boolean;
}

/** /docs + /openapi.json always; /web + /web/catalog when the web page is enabled. */
export function registerWebRoutes(router: Router, deps: WebRouteDeps): void {
  const docsPage = loadPage('docs.html', { '/*INLINE:docs.css*/': 'docs.css', '/*INLINE:docs.js*/': 'docs.js' });
  router
    .add('GET', '/openapi.json', ({ res }) => sendJson(res, 200, deps.openApiDocument))
    .add('GET', '/docs', ({ res }) => sendText(res, 200, 'text/html; charset=utf-8', docsPage, htmlHeaders));
  if (!deps.webEnabled) {
    router.add('GET', '/', ({ res, url }) => redirect(res, `/docs${url.search}`));
    return;
  }
  const webPage = loadPage('index.html', { '/*INLINE:style.css*/': 'style.css', '/*INLINE:app.js*/': 'app.js' });
  router
    .add('GET', '/', ({ res, url }) => redirect(res, `/web${url.search}`))
    .add('GET', '/web', ({ res }) => sendText(res, 200, 'text/html; charset=utf-8', webPage, htmlHeaders))
    .add('GET', '/web/', ({ res }) => sendText(res, 200, 'text/html; charset=utf-8', webPage, htmlHeaders))
    .add('GET', '/web/catalog', ({ res }) => sendJson(res, 200, deps.catalog.toDocument()));
}

function redirect(res: ServerResponse, location: string): void {
  res.writeHead(302, { location, 'content-length': 0 });
  res.end();
}
