import { describe, expect, it } from 'vitest';
import { AppError, ErrorCode } from '@sqlenv/shared';
import { ServerUnreachableError } from './http-call.ts';
import { InferencePool, StickyServer, type InferenceServer } from './inference-pool.ts';

const urls = ['http://127.0.0.1:1', 'http://127.0.0.1:2', 'http://127.0.0.1:3'];

function pool(overrides: Partial<{ retries: number; backoffMs: number }> = {}): InferencePool {
  return new InferencePool({ urls, retries: overrides.retries ?? 1, backoffMs: overrides.backoffMs ?? 1, maxBackoffMs: 4, coolDownMs: 60_000 });
}

const down = (server: InferenceServer): never => {
  throw new ServerUnreachableError(ErrorCode.TRANSPORT, `${server.url}: ECONNREFUSED`);
};

describe('InferencePool', () => {
  it('gives each new episode the server with the fewest episodes, ties to the first listed', () => {
    const p = pool();
    const chosen = [p.assign(), p.assign(), p.assign(), p.assign()].map((s) => s?.index);
    expect(chosen).toEqual([0, 1, 2, 0]);
    p.unassign(p.servers[1] as InferenceServer);
    expect(p.assign()?.index).toBe(1);
  });

  it('passes over a server that failed for new episodes while others are healthy', () => {
    const p = pool();
    p.markFailed(p.servers[0] as InferenceServer, 'test');
    expect([p.assign(), p.assign(), p.assign()].map((s) => s?.index)).toEqual([1, 2, 1]);
  });

  it('bounds the requests in flight per server: the next waits for a slot', async () => {
    const server = pool().servers[0] as InferenceServer;
    await server.acquire(2);
    await server.acquire(2);
    let third = false;
    const waiting = server.acquire(2).then(() => (third = true));
    await new Promise((r) => setTimeout(r, 5));
    expect(third).toBe(false);
    server.release();
    await waiting;
    expect(third).toBe(true);
    expect(server.inFlight).toBe(2);
  });

  it('doubles the backoff per retry up to its cap', () => {
    const p = new InferencePool({ urls, backoffMs: 100, maxBackoffMs: 350 });
    expect([0, 1, 2, 3].map((a) => p.backoffMs(a))).toEqual([100, 200, 350, 350]);
  });
});

describe('StickyServer', () => {
  it("keeps an episode's turns on one server", async () => {
    const p = pool();
    const episode = new StickyServer(p);
    const seen: number[] = [];
    for (let turn = 0; turn < 3; turn++) await episode.run('turn', (server) => Promise.resolve(seen.push(server.index)));
    expect(seen).toEqual([0, 0, 0]);
    expect(p.servers.map((s) => s.episodes)).toEqual([1, 0, 0]);
    episode.close();
    episode.close();
    expect(p.servers.map((s) => s.episodes)).toEqual([0, 0, 0]);
  });

  it('retries on the same server, then moves the episode to the least loaded other one, which it then keeps', async () => {
    const p = pool({ retries: 2 });
    const other = new StickyServer(p);
    await other.run('turn', () => Promise.resolve());
    const episode = new StickyServer(p);
    await episode.run('turn', () => Promise.resolve());
    expect(episode.server?.index).toBe(1);
    const calls: number[] = [];
    const result = await episode.run('turn', (server) => {
      calls.push(server.index);
      return server.index === 1 ? down(server) : Promise.resolve(server.index);
    });
    // Three tries on server 1 (two retries), then server 2: it has no episode, server 0 has one.
    expect(calls).toEqual([1, 1, 1, 2]);
    expect(result).toBe(2);
    expect(episode.server?.index).toBe(2);
    expect(p.servers.map((s) => s.episodes)).toEqual([1, 0, 1]);
    expect((p.servers[1] as InferenceServer).failedUntilMs).toBeGreaterThan(Date.now());
  });

  it('fails the turn naming every failure when no server answers', async () => {
    const p = pool({ retries: 0 });
    const episode = new StickyServer(p);
    const error = await episode.run('turn 3 of episode e', down).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AppError);
    expect((error as AppError).code).toBe(ErrorCode.TRANSPORT);
    expect((error as AppError).message).toMatch(/turn 3 of episode e: no inference server answered \(3 tried\)/);
    for (const url of urls) expect((error as AppError).message).toContain(url);
  });

  it('does not retry an answer that is wrong rather than missing', async () => {
    const episode = new StickyServer(pool({ retries: 3 }));
    let calls = 0;
    const error = await episode
      .run('turn', () => {
        calls += 1;
        throw new AppError(ErrorCode.VALIDATION, 'bad answer');
      })
      .catch((e: unknown) => e);
    expect((error as AppError).message).toBe('bad answer');
    expect(calls).toBe(1);
  });
});
