import { describe, expect, it } from 'vitest';
import { ErrorCode, isAppError } from '@sqlenv/shared';
import { SessionRegistry, type EndReason } from './session-registry.ts';
import { createFakeRuntime } from './test-support/fake-runtime.ts';

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

  it('evicts the least recently used idle HTTP session, never a WebSocket or a busy one', async () => {
    const registry = new SessionRegistry({ runtime: createFakeRuntime(), maxSessions: 3, idleTimeoutS: 0 });
    const ended: string[] = [];
    const ws = registry.open('ws', () => ended.push('ws'));
    const older = registry.open('http', () => ended.push('older'));
    const newer = registry.open('http', () => ended.push('newer'));
    await newer.enqueue(() => Promise.resolve());
    older.lastActiveMs = 0;
    let release: () => void = () => undefined;
    const busy = older.enqueue(() => new Promise<void>((r) => (release = r)));
    // The older one is busy: the newer idle one goes instead.
    registry.open('http', () => ended.push('third'));
    expect(ended).toEqual(['newer']);
    expect(registry.get(ws.id)).toBe(ws);
    await new Promise((r) => setImmediate(r)); // let the busy task start, so `release` is its resolver
    release();
    await busy;
    registry.stop();
  });

  it('reaps idle sessions and tells their owner why', async () => {
    const registry = new SessionRegistry({ runtime: createFakeRuntime(), maxSessions: 4, idleTimeoutS: 0.1 });
    const reasons: EndReason[] = [];
    registry.open('ws', (r) => reasons.push(r));
    await new Promise((r) => setTimeout(r, 400));
    expect(reasons).toEqual(['idle']);
    expect(registry.size).toBe(0);
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
