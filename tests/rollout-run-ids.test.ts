import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { RolloutRunSpecSchema } from '@sqlenv/protocol';
import { BullmqTransport, RunAdmin, redisGlobLiteral } from '@sqlenv/rollout';
import { runsCommand, trainerCommand, workerCommand } from '@sqlenv/cli';
import { deleteKeysUnder, scanKeys } from '@sqlenv/rollout/testing';
import { captureIo } from '@sqlenv/shared/testing';

/**
 * A run id names one run and nothing else (docs/security.md, "Run ids and admin commands"): an id
 * with a glob character is refused wherever it enters, and no admin command touches the keys of a
 * run other than the one named. Three real runs share a key base in the shared Redis; after every
 * command the keys of the runs it did not name are compared with what they were.
 */
const REDIS_URL = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';
const keyBase = `ids-${randomBytes(3).toString('hex')}`;
// 'myrun' is a prefix of 'myrun2': a pattern built from the name without escaping reaches both.
const RUNS = ['myrun', 'myrun2', 'other'] as const;
let redis: Redis;

beforeAll(() => {
  redis = new Redis(REDIS_URL);
});

afterAll(async () => {
  await deleteKeysUnder(redis, keyBase);
  redis.disconnect();
});

/** Register the three runs (active: spec and state written by the transport) with a few extra keys each. */
beforeEach(async () => {
  await deleteKeysUnder(redis, keyBase);
  const transport = new BullmqTransport({ redisUrl: REDIS_URL, keyBase });
  try {
    for (const runId of RUNS) {
      await transport.registerRun(RolloutRunSpecSchema.parse({ run_id: runId, policy: 'oracle', episodes: 8, group_size: 4 }));
      await redis.set(`${keyBase}:{${runId}}:blob:${runId}/traj/e0/f0`, 'trajectory');
      await redis.hset(`${keyBase}:{${runId}}:state`, 'version', '1');
      await redis.zadd(`${keyBase}:{${runId}}:weights`, 1, `${runId}/weights/v1-a1`);
      await redis.set(`${keyBase}:{${runId}}:blob:${runId}/weights/v1-a1`, 'weights');
    }
  } finally {
    await transport.close();
  }
});

/** Every key of a run with its serialised value, so a changed key shows as well as a deleted one. */
async function snapshot(runId: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const key of await scanKeys(redis, `${keyBase}:{${runId}}:*`)) out[key] = (await redis.dumpBuffer(key))?.toString('base64') ?? '';
  return out;
}

async function snapshotAll(): Promise<Record<string, Record<string, string>>> {
  return Object.fromEntries(await Promise.all(RUNS.map(async (runId) => [runId, await snapshot(runId)] as const)));
}

async function runs(argv: string[]): Promise<{ code: number; out: string; err: string }> {
  const io = captureIo();
  const code = await runsCommand(argv, { stdout: io.stdout, stderr: io.stderr, env: { REDIS_URL, SQLENV_KEY_BASE: keyBase } });
  return { code, ...io.text() };
}

const HOSTILE_IDS = ['myrun*', '*', 'myru?', 'myrun?', 'myru[n]', 'myrun[2]', '[mo]*', 'myrun\\', '../myrun', 'my run', ''] as const;

describe('run ids in the admin commands', () => {
  it.each(HOSTILE_IDS)('refuses the run id %j in every runs command and changes no key', async (runId) => {
    const before = await snapshotAll();
    expect(Object.values(before).every((keys) => Object.keys(keys).length >= 4)).toBe(true);
    for (const argv of [['delete', runId], ['delete', runId, '--force'], ['show', runId], ['checkpoint', runId, 'pin']]) {
      const result = await runs(argv);
      expect(result.code, `${argv.join(' ')}: ${result.out}`).toBe(2);
      expect(result.err).toContain('is not a run id');
    }
    expect(await snapshotAll()).toEqual(before);
  });

  it('refuses a hostile run id in the RunAdmin API itself (delete, expire, show, checkpoint)', async () => {
    const before = await snapshotAll();
    const admin = new RunAdmin({ redisUrl: REDIS_URL, keyBase });
    try {
      for (const runId of ['myrun*', '*', 'myru?', 'myrun[2]']) {
        await expect(admin.delete(runId, { force: true })).rejects.toThrow(/is not a run id/);
        await expect(admin.expire(runId, 1)).rejects.toThrow(/is not a run id/);
        await expect(admin.show(runId)).rejects.toThrow(/is not a run id/);
        await expect(admin.checkpoint(runId, 'pin')).rejects.toThrow(/is not a run id/);
      }
    } finally {
      await admin.close();
    }
    expect(() => new RunAdmin({ redisUrl: REDIS_URL, keyBase: `${keyBase}*` })).toThrow();
    expect(await snapshotAll()).toEqual(before);
  });

  it('deletes the named run only: its prefix-sharing neighbour and the others keep every key', async () => {
    const before = await snapshotAll();
    const refused = await runs(['delete', 'myrun']);
    expect(refused.code).toBe(2);
    expect(refused.err).toMatch(/still active .* --force/);
    expect(await snapshotAll()).toEqual(before);

    const show = await runs(['show', 'myrun', '--json']);
    expect(show.code, show.err).toBe(0);
    expect(JSON.parse(show.out)).toMatchObject({ run_id: 'myrun', keys: Object.keys(before['myrun'] ?? {}).length });

    const pin = await runs(['checkpoint', 'myrun', 'best', '--json']);
    expect(pin.code, pin.err).toBe(0);
    expect(await snapshot('myrun2')).toEqual(before['myrun2']);
    expect(await snapshot('other')).toEqual(before['other']);

    const deleted = await runs(['delete', 'myrun', '--force', '--json']);
    expect(deleted.code, deleted.err).toBe(0);
    expect(await snapshot('myrun')).toEqual({});
    expect(await snapshot('myrun2')).toEqual(before['myrun2']);
    expect(await snapshot('other')).toEqual(before['other']);
    const listed = JSON.parse((await runs(['list', '--json'])).out) as Array<{ run_id: string }>;
    expect(listed.map((r) => r.run_id).sort()).toEqual(['myrun2', 'other']);
  });

  it('expires the named run only', async () => {
    await redis.hset(`${keyBase}:{myrun}:state`, 'done', '1');
    await redis.hset(`${keyBase}:{myrun2}:state`, 'done', '1');
    const before = await snapshotAll();
    const admin = new RunAdmin({ redisUrl: REDIS_URL, keyBase });
    try {
      expect(await admin.expire('myrun', 600)).toBe(Object.keys(before['myrun'] ?? {}).length);
    } finally {
      await admin.close();
    }
    for (const key of Object.keys(before['myrun'] ?? {})) expect(await redis.pttl(key)).toBeGreaterThan(0);
    for (const key of [...Object.keys(before['myrun2'] ?? {}), ...Object.keys(before['other'] ?? {})]) expect(await redis.pttl(key), key).toBe(-1);
  });

  it('lists a name in the run listing that is no run id without touching any run, then forgets it', async () => {
    await redis.zadd(`${keyBase}:all-runs`, Date.now(), 'myrun*');
    const before = await snapshotAll();
    const first = JSON.parse((await runs(['list', '--json'])).out) as Array<{ run_id: string; state: string }>;
    expect(first).toEqual(expect.arrayContaining([expect.objectContaining({ run_id: 'myrun*', state: 'invalid' })]));
    expect(first.filter((r) => r.state === 'active').map((r) => r.run_id).sort()).toEqual([...RUNS]);
    const second = JSON.parse((await runs(['list', '--json'])).out) as Array<{ run_id: string }>;
    expect(second.map((r) => r.run_id).sort()).toEqual([...RUNS]);
    expect(await snapshotAll()).toEqual(before);
  });

  it('discovers active runs past a name in the active-run set that is no run id', async () => {
    await redis.sadd(`${keyBase}:runs`, 'myrun*', '../x');
    const before = await snapshotAll();
    const transport = new BullmqTransport({ redisUrl: REDIS_URL, keyBase });
    try {
      expect(await transport.activeRuns()).toEqual([...RUNS]);
    } finally {
      await transport.close();
    }
    expect(await snapshotAll()).toEqual(before);
  });
});

describe('run ids where the distributed apps take them', () => {
  it.each([
    ['trainer', ['--run', 'myrun*'], {}],
    ['trainer', [], { RUN_ID: '*' }],
    ['worker', ['--run', 'myru?'], {}],
    ['worker', [], { RUN_ID: 'myrun[2]' }],
  ] as const)('%s %j %j is refused before it connects', async (app, argv, env) => {
    const io = captureIo();
    const command = app === 'trainer' ? trainerCommand : workerCommand;
    // A Redis URL nobody listens on: a refusal must come from the run id, not from a connection.
    const code = await command([...argv], { stdout: io.stdout, stderr: io.stderr, env: { REDIS_URL: 'redis://127.0.0.1:1', SQLENV_KEY_BASE: keyBase, ...env } });
    expect(code).toBe(2);
    expect(io.text().err).toMatch(/run ?Id|run id/i);
    expect(io.text().err).toMatch(/A–Z a–z 0–9 _ -/);
  });
});

describe('redisGlobLiteral', () => {
  it('makes a SCAN pattern that matches the literal key only, whatever glob characters it holds', async () => {
    const base = `${keyBase}:glob`;
    const names = ['a*b', 'aXb', 'a?b', 'a[x]b', 'axb', 'a\\b', 'a^b', 'a-b', 'a]b', 'a[b', '*', '?', 'ab'];
    for (const name of names) await redis.set(`${base}:${name}`, name);
    for (const name of names) {
      expect(await scanKeys(redis, redisGlobLiteral(`${base}:${name}`)), name).toEqual([`${base}:${name}`]);
    }
    // Unescaped, the same names do reach other keys (what the escaping is for).
    expect((await scanKeys(redis, `${base}:a*b`)).length).toBeGreaterThan(1);
  });
});
