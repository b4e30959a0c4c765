import { AppError, ErrorCode } from '@sqlenv/shared';

/** What one HTTP call to an inference server answered (any status). */
export interface HttpReply {
  status: number;
  text: string;
}

export interface HttpCallOptions {
  method: 'GET' | 'POST';
  url: string;
  body?: unknown;
  apiKey?: string;
  /** The whole call, connection to last byte, in milliseconds. */
  timeoutMs: number;
  /** A body larger than this is cut off and the call fails (a server must never make this process buffer without bound). */
  maxResponseBytes: number;
  /** Sent as X-Request-Id (vLLM logs it) and named in errors. */
  requestId?: string;
}

/**
 * A failure of the server or the network (refused, reset, timed out, body too
 * large): the caller may retry or move to another server. An HTTP error status
 * is not one: it comes back as a reply.
 */
export class ServerUnreachableError extends AppError {
  constructor(code: ErrorCode, message: string, cause?: unknown) {
    super(code, message, cause === undefined ? {} : { cause });
  }
}

/** One HTTP call with a deadline and a bound on the body read. */
export async function httpCall(options: HttpCallOptions): Promise<HttpReply> {
  const label = `${options.method} ${options.url}${options.requestId === undefined ? '' : ` (request ${options.requestId})`}`;
  const headers: Record<string, string> = { accept: 'application/json' };
  if (options.body !== undefined) headers['content-type'] = 'application/json';
  if (options.apiKey !== undefined) headers['authorization'] = `Bearer ${options.apiKey}`;
  if (options.requestId !== undefined) headers['x-request-id'] = options.requestId;
  const signal = AbortSignal.timeout(options.timeoutMs);
  try {
    const response = await fetch(options.url, {
      method: options.method,
      headers,
      ...(options.body === undefined ? {} : { body: JSON.stringify(options.body) }),
      signal,
    });
    const text = await readBounded(response, options.maxResponseBytes, label);
    return { status: response.status, text };
  } catch (error) {
    if (error instanceof ServerUnreachableError) throw error;
    if (signal.aborted) throw new ServerUnreachableError(ErrorCode.TIMEOUT, `${label}: no complete answer within ${options.timeoutMs} ms`, error);
    throw new ServerUnreachableError(ErrorCode.TRANSPORT, `${label}: ${networkReason(error)}`, error);
  }
}

async function readBounded(response: Response, maxBytes: number, label: string): Promise<string> {
  const declared = Number(response.headers.get('content-length') ?? Number.NaN);
  if (declared > maxBytes) {
    await response.body?.cancel();
    throw new ServerUnreachableError(ErrorCode.CAPACITY, `${label}: the answer declares ${declared} bytes, over the ${maxBytes}-byte bound`);
  }
  if (response.body === null) return '';
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let sizeBytes = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    sizeBytes += value.byteLength;
    if (sizeBytes > maxBytes) {
      await reader.cancel();
      throw new ServerUnreachableError(ErrorCode.CAPACITY, `${label}: the answer passed the ${maxBytes}-byte bound`);
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** The system error behind fetch's "fetch failed" (ECONNREFUSED, ECONNRESET, ENOTFOUND...). */
function networkReason(error: unknown): string {
  const cause = error instanceof Error ? (error.cause as { code?: unknown; message?: unknown } | undefined) : undefined;
  if (cause !== undefined && typeof cause.code === 'string') return `${cause.code}${typeof cause.message === 'string' ? ` (${cause.message})` : ''}`;
  if (cause !== undefined && typeof cause.message === 'string') return cause.message;
  return error instanceof Error ? error.message : String(error);
}
