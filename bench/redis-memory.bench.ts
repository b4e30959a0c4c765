/**
 * Redis memory per 1,000 episodes in flight (docs/operations.md, "Redis"): a run is admitted up to
 * its staleness bound with no trainer, the episodes are played and their groups scored, and Redis'
 * used_memory is read before and after. Two kinds of episode: text-only (the baseline policies:
 * no token arrays) and LLM-shaped (token-in/token-out trajectories with synthetic ids of a realistic
 * size: a 700-token first prompt, 150-token observations, 80 sampled tokens per turn; the toy
 * policy plays 2 turns, DESCRIBE then ANSWER).
 * A private redis-server on a free port, so nothing else is counted.
 *   npm run bench:redis-memory    (BENCH_EPISODES=1000 by default)
 *   BENCH_EPISODES=40 BENCH_RESULTS_DIR=/tmp/r npm run bench:redis-memory   (smallest)
 * Writes <results dir>/redis-memory.md and .json.
 */
import { Redis } from 'ioredis';
import type { Policy, PolicyEpisode } from '@sqlenv/agents';
import { RolloutRunSpecSchema } from '@sqlenv/protocol';
import { BullmqTransport, RolloutWorker, runCoordinator, scoreGroup, type TurnTokens } from '@sqlenv/rollout';
import { startPrivateRedis, TOY_QUESTIONS, ToyPolicy, toyEnvironments } from '@sqlenv/rollout/testing';
import { startBench } from './lib/harness.ts';

const EPISODES = Number(process.env['BENCH_EPISODES'] ?? 1000);
const GROUP_SIZE = 8;

/** The toy policy's actions with the token record of an LLM turn (random ids, sampling log-probs). */
class TokenShapedPolicy implements Policy {
  readonly name = 'token-shaped';
  readonly #inner = new ToyPolicy();
  begin(context: Parameters<Policy['begin']>[0]): PolicyEpisode & { takeTurnTokens(): TurnTokens } {
    const inner = this.#inner.begin(context);
    let turn = 0;
    const ids = (n: number): number[] => Array.from({ length: n }, () => Math.floor(Math.random() * 151_936));
    return {
      act: (observation) => inner.act(observation),
      takeTurnTokens: (): TurnTokens => {
        const prompt = ids(turn++ === 0 ? 700 : 150);
        const completion = ids(80);
        return { prompt_ids: prompt, completion_ids: completion, loss_mask: [...prompt.map(() => 0 as const), ...completion.map(() => 1 as const)], logprobs: completion.map(() => -Math.random() * 3), parse_error: null, policy_version: 0, text: '' };
      },
    };
  }
}

async function measure(label: string, policy: Policy): Promise<{ label: string; episodes: number; bytes: number; bytesPerEpisode: number; trajectoryBytes: number }> {
  const redis = await startPrivateRedis();
  const client = new Redis(redis.url);
  const used = async (): Promise<number> => Number(/used_memory:(\d+)/.exec(await client.info('memory'))?.[1]);
  const runId = `mem-${label}`;
  const groupsPerBatch = EPISODES / GROUP_SIZE / 5;
  // Admitted up to the staleness bound at version 0: (S + 1) × B groups = every episode at once.
  const spec = RolloutRunSpecSchema.parse({ run_id: runId, policy: 'toy', episodes: EPISODES, group_size: GROUP_SIZE, groups_per_batch: groupsPerBatch, max_staleness: 4, drop_zero_variance: false });
  const transport = new BullmqTransport({ redisUrl: redis.url, keyBase: 'bench' });
  try {
    await transport.registerRun(spec);
    const before = await used();
    let scored = 0;
    const groups = transport.consumeGroups(runId, (group, results) => scoreGroup(spec, group, results), { onScored: () => void (scored += 1) });
    const worker = new RolloutWorker({ transport, resolveRun: () => Promise.resolve({ policy, environments: toyEnvironments() }), concurrency: 32, workerId: 'bench', discoveryMs: 50 });
    await worker.start();
    const stop = new AbortController();
    const coordinator = runCoordinator({ transport, spec, questions: TOY_QUESTIONS, pollMs: 50, signal: stop.signal }).catch(() => undefined);
    while (scored < EPISODES / GROUP_SIZE) await new Promise((resolve) => setTimeout(resolve, 100));
    await worker.close();
    await groups.close();
    stop.abort();
    await coordinator;
    const after = await used();
    const keys = await client.keys('bench:*:blob:traj/*');
    const sizes = await Promise.all(keys.slice(0, 50).map((k) => client.strlen(k)));
    const trajectoryBytes = Math.round(sizes.reduce((s, x) => s + x, 0) / Math.max(1, sizes.length));
    return { label, episodes: EPISODES, bytes: after - before, bytesPerEpisode: Math.round((after - before) / EPISODES), trajectoryBytes };
  } finally {
    await transport.close();
    client.disconnect();
    await redis.kill();
  }
}

const bench = startBench('redis-memory');
const results = [await measure('text', new ToyPolicy()), await measure('llm-shaped', new TokenShapedPolicy())];
const lines = [
  `\`npm run bench:redis-memory\` — ${EPISODES} episodes admitted at once (no trainer), played and scored, groups of ${GROUP_SIZE}; private redis-server.`,
  '',
  '| episodes | Redis used_memory growth | per episode | per 1,000 episodes | stored trajectory (avg) |',
  '| --- | ---: | ---: | ---: | ---: |',
  ...results.map((r) => `| ${r.label} | ${(r.bytes / 2 ** 20).toFixed(1)} MiB | ${(r.bytesPerEpisode / 1024).toFixed(1)} KiB | ${((r.bytesPerEpisode * 1000) / 2 ** 20).toFixed(1)} MiB | ${(r.trajectoryBytes / 1024).toFixed(1)} KiB |`),
  '',
  'LLM-shaped: 2 turns (DESCRIBE, ANSWER), a 700-token first prompt, a 150-token observation, 80 sampled tokens per',
  'turn (random ids and log-probs, JSON as stored); a trajectory grows by about 2.3 KiB per further turn of that shape. The rest per episode is the BullMQ job (data, result, lock, events) and the',
  'scored group. Trained groups are deleted (trajectories) or bounded (kept jobs, events), so this is the',
  'memory of the episodes between admission and training — bounded by the staleness bound (S + 1) × B groups.',
  '',
];
bench.write({ title: 'Redis memory per episode in flight', body: lines, data: { episodes: EPISODES, groupSize: GROUP_SIZE, results } });
process.stdout.write(`${lines.join('\n')}`);
