import { describe, expect, it } from 'vitest';
import { ModelGate } from './model-gate.ts';

function gateWithLog(initial = 'base'): { gate: ModelGate; switches: string[] } {
  const switches: string[] = [];
  const gate = new ModelGate(initial, (model) => {
    switches.push(model);
    return Promise.resolve();
  });
  return { gate, switches };
}

const tick = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

describe('ModelGate', () => {
  it('admits requests of the active model at once, without switching', async () => {
    const { gate, switches } = gateWithLog();
    await Promise.all([gate.acquire('base'), gate.acquire('base')]);
    expect(gate.running).toBe(2);
    expect(switches).toEqual([]);
  });

  it('switches only once the active model has drained, then admits every waiting request of the new model', async () => {
    const { gate, switches } = gateWithLog();
    await gate.acquire('base');
    const admitted: string[] = [];
    const a1 = gate.acquire('a').then(() => admitted.push('a1'));
    const a2 = gate.acquire('a').then(() => admitted.push('a2'));
    await tick();
    expect(admitted).toEqual([]);
    expect(switches).toEqual([]);
    gate.release();
    await Promise.all([a1, a2]);
    expect(switches).toEqual(['a']);
    expect(gate.active).toBe('a');
    expect(gate.running).toBe(2);
  });

  it('queues new requests of the active model behind a waiting model, so the waiting one is not starved', async () => {
    const { gate, switches } = gateWithLog();
    await gate.acquire('base');
    const order: string[] = [];
    const a = gate.acquire('a').then(() => order.push('a'));
    const lateBase = gate.acquire('base').then(() => order.push('base'));
    await tick();
    expect(order).toEqual([]);
    gate.release();
    await a;
    expect(order).toEqual(['a']);
    gate.release();
    await lateBase;
    expect(order).toEqual(['a', 'base']);
    expect(switches).toEqual(['a', 'base']);
  });

  it('serves waiting models oldest first', async () => {
    const { gate, switches } = gateWithLog();
    await gate.acquire('base');
    const b = gate.acquire('b');
    const a = gate.acquire('a');
    gate.release();
    await b;
    gate.release();
    await a;
    expect(switches).toEqual(['b', 'a']);
  });

  it('fails the waiting requests of a model whose activation failed and moves on to the next', async () => {
    const gate = new ModelGate('base', (model) => (model === 'gone' ? Promise.reject(new Error('no such adapter')) : Promise.resolve()));
    await gate.acquire('base');
    const gone = gate.acquire('gone');
    const b = gate.acquire('b');
    gate.release();
    await expect(gone).rejects.toThrow('no such adapter');
    await b;
    expect(gate.active).toBe('b');
    expect(gate.waiting).toBe(0);
  });

  it('activates a forgotten model afresh on its next request, after the running ones drain', async () => {
    const { gate, switches } = gateWithLog();
    await gate.acquire('a');
    expect(switches).toEqual(['a']);
    gate.forget('b');
    expect(gate.active).toBe('a');
    gate.forget('a');
    const again = gate.acquire('a');
    await tick();
    expect(switches).toEqual(['a']);
    gate.release();
    await again;
    expect(switches).toEqual(['a', 'a']);
  });

  it('refuses a release without an acquire', () => {
    expect(() => new ModelGate('base', () => Promise.resolve()).release()).toThrow(/without a matching acquire/);
  });
});
