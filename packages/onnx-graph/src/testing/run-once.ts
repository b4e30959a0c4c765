import { createSession } from '../runtime/session.ts';
import type { Graph } from '../graph.ts';
import type { TensorData } from '../tensor-data.ts';

/** Test helper: build the model, run it once in direct mode, release the session. */
export async function runOnce(g: Graph, feeds: Record<string, TensorData> = {}): Promise<Record<string, TensorData>> {
  const session = await createSession(g.toModel(), { mode: 'direct' });
  try {
    return await session.run(feeds);
  } finally {
    await session.close();
  }
}

/** Deterministic PRNG (mulberry32) so failures reproduce. */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** n standard-normal samples (Box-Muller). */
export function randn(next: () => number, n: number): number[] {
  const out: number[] = [];
  while (out.length < n) {
    const u = Math.max(next(), 1e-12);
    const v = next();
    out.push(Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v));
  }
  return out;
}
