import { randomInt } from 'node:crypto';
import { RandomPolicy, type Policy } from '@sqlenv/agents';
import type { EpisodeJob, Trajectory } from '@sqlenv/protocol';
import { withShutdownSignal } from '@sqlenv/shared';
import { createSqlEnvRuntime } from '@sqlenv/sql-env';
import { RolloutWorker } from '../rollout-worker.ts';
import { BullmqTransport } from '../transport/bullmq-transport.ts';

/**
 * A worker process with a sampling policy that differs between processes — as an LLM sampling on
 * different GPUs would: the random policy seeded per process, with a short delay per action (a
 * model's sampling time) so that a SIGSTOP lands mid-episode. Every trajectory store attempt is
 * printed as one JSON line ({event: 'stored' | 'refused', worker, episode_id, key, reward}), so the
 * test can tell which attempt's trajectory was trained.
 * Usage: node --import tsx sampling-worker.ts <redis url> <key base> <run id> <worker name> <lock ms> <stalled interval ms>
 */
const [redisUrl, keyBase, runId, name, lockText, stalledText] = process.argv.slice(2);
if (!redisUrl || !keyBase || !runId || !name || !lockText || !stalledText) throw new Error('usage: sampling-worker <redis url> <key base> <run id> <worker name> <lock ms> <stalled interval ms>');
const runtime = await createSqlEnvRuntime({ dataset: 'builtin', executor: { poolSize: 1 } });
const transport = new BullmqTransport({ redisUrl, keyBase, lockDurationMs: Number(lockText), stalledIntervalMs: Number(stalledText) });
const print = (line: object): void => void process.stdout.write(`${JSON.stringify(line)}\n`);

// Report every store attempt (the method the worker calls), whatever its outcome.
const store = transport.storeTrajectory.bind(transport);
transport.storeTrajectory = async (trajectory: Trajectory, job: EpisodeJob, fence: string): Promise<string> => {
  try {
    const key = await store(trajectory, job, fence);
    print({ event: 'stored', worker: name, episode_id: trajectory.episode_id, key, reward: trajectory.outcome.total_reward });
    return key;
  } catch (error) {
    print({ event: 'refused', worker: name, episode_id: trajectory.episode_id, reason: error instanceof Error ? error.message : String(error) });
    throw error;
  }
};

const sampler = new RandomPolicy({ seed: randomInt(2 ** 31), answerProbability: 0.3 });
const policy: Policy = {
  name: 'random',
  begin: (context) => {
    const episode = sampler.begin(context);
    return { act: async (observation) => ((await new Promise((resolve) => setTimeout(resolve, 40))), episode.act(observation)) };
  },
};
const worker = new RolloutWorker({
  transport,
  resolveRun: () => Promise.resolve({ policy, environments: { create: () => runtime.createEnvironment() } }),
  concurrency: 4,
  runId,
  workerId: name,
  discoveryMs: 100,
});
await withShutdownSignal(async (signal) => {
  await worker.start();
  print({ event: 'started', worker: name });
  await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
  return 0;
});
await worker.close();
await transport.close();
await runtime.close();
process.exit(0);
