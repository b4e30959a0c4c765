import { createServer, type RequestListener, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { ErrorCode } from '@sqlenv/shared';
import { httpCall, ServerUnreachableError } from './http-call.ts';

/** A server that misbehaves in ways a correct inference server never does (failure injection only). */
const servers: Server[] = [];
async function faulty(handler: RequestListener): Promise<string> {
  const server = createServer(handler);
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

const call = (url: string, options: { timeoutMs?: number; maxResponseBytes?: number } = {}) =>
  httpCall({ method: 'POST', url: `${url}/v1/completions`, body: { a: 1 }, apiKey: 'k', requestId: 'ep-t0-a0', timeoutMs: options.timeoutMs ?? 10_000, maxResponseBytes: options.maxResponseBytes ?? 1024 });

describe('httpCall', () => {
  it('sends the body, the bearer key and the request id, and returns any status with its text', async () => {
    let seen: { auth?: string; id?: string; body: string } = { body: '' };
    const url = await faulty((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        seen = { auth: req.headers.authorization, id: req.headers['x-request-id'] as string, body };
        res.writeHead(503).end('overloaded');
      });
    });
    expect(await call(url)).toEqual({ status: 503, text: 'overloaded' });
    expect(seen).toEqual({ auth: 'Bearer k', id: 'ep-t0-a0', body: '{"a":1}' });
  });

  it('cuts off an answer over the byte bound, declared or streamed', async () => {
    const declared = await faulty((_req, res) => res.writeHead(200, { 'content-length': '5000' }).end('x'.repeat(5000)));
    const streamed = await faulty((_req, res) => {
      res.writeHead(200);
      res.write('x'.repeat(800));
      res.end('x'.repeat(800));
    });
    for (const url of [declared, streamed]) {
      const error = await call(url).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ServerUnreachableError);
      expect((error as ServerUnreachableError).code).toBe(ErrorCode.CAPACITY);
      expect((error as Error).message).toMatch(/1024-byte bound/);
      expect((error as Error).message).toContain('request ep-t0-a0');
    }
  });

  it('fails a server that hangs with TIMEOUT once the deadline passes', async () => {
    const url = await faulty(() => undefined);
    const error = await call(url, { timeoutMs: 200 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ServerUnreachableError);
    expect((error as ServerUnreachableError).code).toBe(ErrorCode.TIMEOUT);
  });

  it('names the refusal of a port nobody listens on', async () => {
    const url = await faulty(() => undefined);
    const server = servers.pop() as Server;
    await new Promise((resolve) => server.close(resolve));
    const error = await call(url).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ServerUnreachableError);
    expect((error as Error).message).toMatch(/ECONNREFUSED/);
  });
});
