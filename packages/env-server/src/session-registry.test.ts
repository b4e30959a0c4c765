import { describe, expect, it } from 'vitest';
import { ErrorCode, isAppError } from '@sqlenv/shared';
import { SessionRegistry, type EndReason } from './session-registry.ts';
import { createFakeRuntime } from './testing/fake-runtime.ts';

describe('SessionRegistry', () => {
  it('refuses past capacity with CAPACITY and details for the error frame', () => {
    const registry = new SessionRegistry({ runtime: createFakeRuntime(), maxSessions: 1, idleTimeoutS: 0 });
    registry.open('ws', () => undefined);
    let caught: unknown;
    try {
      registry.open('ws', () => undefined);
    } catch (error) {
      caught = error;
    }
    expect(isAppError(caught) && caught.code).toBe(ErrorCode.CAPACITY);
    expect(isAppError(caught) && caught.details).toEqual({ active_sessions: 1, max_sessions: 1 });
    registry.stop();
  });

  it('when full, evicts the session idle the longest, never one that is busy or active within the idle timeout', async () => {
    const registry = new SessionRegistry({ runtime: createFakeRuntime(), maxSessions: 3, idleTimeoutS: 60 });
    const ended: string[] = [];
    const ws = registry.open('ws', () => ended.push('ws'));
    const older = registry.open('http', () => ended.push('older'));
    const newer = registry.open('http', () => ended.push('newer'));
    // Nobody idle for 60 s: a fourth session is refused, nobody dropped.
    expect(() => registry.open('http', () => ended.push('fourth'))).toThrow(/capacity/);
    expect(ended).toEqual([]);
    const longAgoMs = performance.now() - 120_000;
    ws.lastActiveMs = longAgoMs;
    older.lastActiveMs = longAgoMs - 1;
    newer.lastActiveMs = longAgoMs - 2;
    let release: () => void = () => undefined;
    const busy = newer.enqueue(() => new Promise<void>((r) => (release = r)));
    newer.lastActiveMs = longAgoMs - 2; // a request in flight makes it busy, whatever its timestamp says
    registry.open('http', () => ended.push('third'));
    expect(ended).toEqual(['older']);
    registry.open('ws', () => ended.push('fifth'));
    // WebSocket sessions are evicted like any other once idle (their client reconnects).
    expect(ended).toEqual(['older', 'ws']);
    expect(registry.get(newer.id)).toBe(newer);
    await new Promise((r) => setImmediate(r)); // let the busy task start, so `release` is its resolver
    release();
    await busy;
    registry.stop();
  });

  it("reaping releases an idle WebSocket session's environment and keeps the session; an idle HTTP session ends", async () => {
    const registry = new SessionRegistry({ runtime: createFakeRuntime(), maxSessions: 4, idleTimeoutS: 0.1 });
    const reasons: EndReason[] = [];
    const ws = registry.open('ws', (r) => reasons.push(r));
    registry.open('http', (r) => reasons.push(r));
    await ws.enqueue(() => ws.envForReset().reset());
    await new Promise((r) => setTimeout(r, 400));
    expect(reasons).toEqual(['idle']);
    expect(registry.size).toBe(1);
    expect(registry.get(ws.id)).toBe(ws);
    expect(ws.isReleased).toBe(true);
    expect(() => ws.envForStep()).toThrow(/idle for more than 0.1 s/);
    expect(ws.envForState().state().episode_id).toBeNull();
    await ws.envForReset().reset();
    expect(ws.envForStep().state().episode_id).not.toBeNull();
    registry.stop();
  });

  it('runs requests of one session strictly in order', async () => {
    const registry = new SessionRegistry({ runtime: createFakeRuntime(), maxSessions: 1, idleTimeoutS: 0 });
    const session = registry.open('ws', () => undefined);
    const order: number[] = [];
    const slow = session.enqueue(async () => {
      await new Promise((r) => setTimeout(r, 30));
      order.push(1);
    });
    const failing = session.enqueue(() => Promise.reject(new Error('boom')));
    const fast = session.enqueue(() => {
      order.push(3);
      return Promise.resolve();
    });
    await Promise.allSettled([slow, failing, fast]);
    expect(order).toEqual([1, 3]);
    expect(session.depth).toBe(0);
    registry.stop();
  });
});
