import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';

/**
 * node:http helpers the project's servers share: JSON/text replies, a size-capped JSON body reader and
 * bearer-token checks. Each server shapes its own error bodies from the reader's failures.
 */
export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  sendText(res, status, 'application/json', JSON.stringify(body), headers);
}

export function sendText(res: ServerResponse, status: number, contentType: string, body: string | Buffer, headers: Record<string, string> = {}): void {
  res.writeHead(status, {
    'content-type': contentType,
    'content-length': Buffer.byteLength(body),
    ...headers,
  });
  res.end(body);
}

/** A body that could not be read: over the size limit (413) or not JSON (`invalidJson`, the parser's message). */
export type JsonBodyFailure = { ok: false; status: 413; message: string } | { ok: false; status: 400; invalidJson: true; message: string };
export type JsonBodyResult = { ok: true; value: unknown } | JsonBodyFailure;

/**
 * Read a JSON body of at most `maxBytes`; an empty body reads as `undefined`. An oversized body stops
 * being buffered as soon as the limit is crossed, and is drained so the reply still goes out on the
 * same connection.
 */
export function readJsonBody(req: IncomingMessage, maxBytes: number): Promise<JsonBodyResult> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > maxBytes) {
    req.resume();
    return Promise.resolve({ ok: false, status: 413, message: `Request body of ${declared} bytes exceeds the limit of ${maxBytes} bytes` });
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
        resolve({ ok: false, status: 413, message: `Request body exceeds the limit of ${maxBytes} bytes` });
        req.resume();
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => {
      if (done) return;
      done = true;
      resolve(parseJsonText(Buffer.concat(chunks).toString('utf8')));
    });
    req.on('error', (error) => {
      if (done) return;
      done = true;
      reject(error);
    });
  });
}

function parseJsonText(text: string): JsonBodyResult {
  if (text.trim() === '') return { ok: true, value: undefined };
  try {
    return { ok: true, value: JSON.parse(text) as unknown };
  } catch (error) {
    return { ok: false, status: 400, invalidJson: true, message: `Invalid JSON: ${error instanceof Error ? error.message : String(error)}` };
  }
}

function digest(value: string): Buffer {
  return createHash('sha256').update(value).digest();
}

/** Constant-time comparison (hashing first makes the lengths equal). */
export function tokenMatches(candidate: string, apiKey: string): boolean {
  return timingSafeEqual(digest(candidate), digest(apiKey));
}

const BEARER_SCHEME = 'Bearer';
const BEARER_RE = /^Bearer\s/i;

/** The token of an `Authorization: Bearer <token>` header, or undefined. */
export function bearerToken(req: IncomingMessage): string | undefined {
  const header = req.headers.authorization;
  if (header === undefined) return undefined;
  // A prefix test and a slice, not /^Bearer\s+(.+)$/: that pattern backtracks over every split of the spaces.
  const value = header.trim();
  const token = BEARER_RE.test(value) ? value.slice(BEARER_SCHEME.length).trim() : '';
  return token === '' ? undefined : token;
}
