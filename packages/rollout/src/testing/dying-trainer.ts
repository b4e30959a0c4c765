import { runTrainer, StatsPolicyUpdater } from '../trainer.ts';
import { BullmqTransport } from '../transport/bullmq-transport.ts';
import type { BlobStore } from '../store/blob-store.ts';

/**
 * A trainer process that dies between writing its weights and committing them: on its Nth weights
 * write it stores the blob and then SIGKILLs itself, the way a machine failure would cut it.
 * Usage: node --import tsx dying-trainer.ts <redis url> <key base> <run id> <die at weights write N>
 */
const [redisUrl, keyBase, runId, dieAtText] = process.argv.slice(2);
if (!redisUrl || !keyBase || !runId || !dieAtText) throw new Error('usage: dying-trainer <redis url> <key base> <run id> <N>');
const transport = new BullmqTransport({ redisUrl, keyBase });
const real = transport.blobs;
let weightsWrites = 0;
const dying: BlobStore = {
  get: (key) => real.get(key),
  getMany: (keys) => real.getMany(keys),
  delete: (key) => real.delete(key),
  deleteMany: (keys) => real.deleteMany(keys),
  put: async (key, data) => {
    await real.put(key, data);
    if (key.includes('/weights/') && ++weightsWrites >= Number(dieAtText)) {
      process.stdout.write(`${JSON.stringify({ died_after_writing: key })}\n`, () => process.kill(process.pid, 'SIGKILL'));
      await new Promise(() => undefined);
    }
  },
};
Object.defineProperty(transport, 'blobs', { value: dying });
await runTrainer({ transport, runId, updater: new StatsPolicyUpdater(), pollMs: 50, runWaitMs: 60_000, retention: { keepLast: 2, checkpointEvery: 0 } });
