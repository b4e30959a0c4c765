import { describe, expect, it } from 'vitest';
import { RolloutRunSpecSchema } from '@sqlenv/protocol';
import { InProcessTransport } from './in-process-transport.ts';
import { weightsToPrune } from './weights-retention.ts';

describe('weightsToPrune', () => {
  const committed = Array.from({ length: 10 }, (_, i) => ({ version: i + 1, key: `r/weights/v${i + 1}-attempt${i % 3}` }));

  it('keeps the newest K, every checkpointEvery-th version and the protected keys; prunes the rest', () => {
    const prune = weightsToPrune(committed, { keepLast: 3, checkpointEvery: 4 }, new Set(['r/weights/v2-attempt1']));
    expect(prune).toEqual(['r/weights/v1-attempt0', 'r/weights/v3-attempt2', 'r/weights/v5-attempt1', 'r/weights/v6-attempt2', 'r/weights/v7-attempt0']);
  });

  it('never prunes the newest version, whatever K says, and nothing when there is nothing', () => {
    expect(weightsToPrune(committed, { keepLast: 0, checkpointEvery: 0 }, new Set())).not.toContain('r/weights/v10-attempt0');
    expect(weightsToPrune([], { keepLast: 1, checkpointEvery: 0 }, new Set())).toEqual([]);
  });
});

describe('weights retention through a transport', () => {
  it('deletes pruned versions and uncommitted weights together with the parts stored under their keys', async () => {
    const transport = new InProcessTransport();
    await transport.registerRun(RolloutRunSpecSchema.parse({ run_id: 'r', policy: 'toy', episodes: 8, group_size: 4 }));
    for (let v = 1; v <= 4; v++) {
      const key = `r/weights/v${v}-a${v}`;
      await transport.blobs.put(key, Buffer.from(`adapter ${v}`));
      await transport.blobs.put(`${key}/optimizer`, Buffer.from(`adam ${v}`));
      await transport.commit('r', { expectedVersion: v - 1, newVersion: v, weightsKey: key, trained: [], dropped: [], trainedSlots: [], batch: null });
    }
    // A trainer died after writing version 5's weights and before committing them.
    await transport.blobs.put('r/weights/v5-dead', Buffer.from('adapter 5'));
    await transport.blobs.put('r/weights/v5-dead/optimizer', Buffer.from('adam 5'));
    expect(await transport.sweepUncommittedWeights('r')).toEqual(['r/weights/v5-dead', 'r/weights/v5-dead/optimizer']);
    expect(await transport.pruneWeights('r', { keepLast: 2, checkpointEvery: 0 })).toEqual(['r/weights/v1-a1', 'r/weights/v2-a2']);
    expect(transport.blobs.keys('r/weights/')).toEqual(['r/weights/v3-a3', 'r/weights/v3-a3/optimizer', 'r/weights/v4-a4', 'r/weights/v4-a4/optimizer']);
    await transport.close();
  });
});
