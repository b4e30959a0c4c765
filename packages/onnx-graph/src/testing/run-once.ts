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
