import type { Redis } from 'ioredis';

/**
 * Lua scripts of the BullMQ transport. Each runs atomically in Redis, which is
 * what makes the trainer's consumption exactly-once: a group leaves the scored
 * buffer, is marked consumed, and the version moves — all or nothing. All keys
 * of one run share the `{run}` hash tag, so the scripts also run on Redis
 * Cluster. Under `maxmemory-policy noeviction` a full Redis refuses a script's
 * first write and lets a script that has written finish, so a script is never
 * half-applied (docs/operations.md, "Redis").
 */

/**
 * Store one attempt's trajectory, unless its group was consumed already (a worker that was paused
 * past its lock and resumes after the trainer took the group writes nothing).
 * KEYS: trajectory value key, completedEpisodes (bitmap), consumedGroups (bitmap), attempts (hash), state
 * ARGV: value, episode slot, group seq, blob key of the trajectory
 * Returns 1 when stored, 0 when the group was consumed.
 */
export const STORE_TRAJECTORY = `
if redis.call('GETBIT', KEYS[3], ARGV[3]) == 1 then return 0 end
redis.call('SET', KEYS[1], ARGV[1])
local listed = redis.call('HGET', KEYS[4], ARGV[3])
if not listed then
  redis.call('HSET', KEYS[4], ARGV[3], ARGV[4])
elseif not string.find('\\n' .. listed .. '\\n', '\\n' .. ARGV[4] .. '\\n', 1, true) then
  redis.call('HSET', KEYS[4], ARGV[3], listed .. '\\n' .. ARGV[4])
end
if redis.call('SETBIT', KEYS[2], ARGV[2], 1) == 0 then redis.call('HINCRBY', KEYS[5], 'completed_episodes', 1) end
return 1
`;

/**
 * Record a scored group unless the trainer already consumed it (a group job
 * re-run after a stall must not bring a consumed group back).
 * KEYS: consumedGroups (bitmap), scored (zset seq → group id), scoredData (hash group id → JSON)
 * ARGV: groupId, seq, scoredJson
 */
export const RECORD_SCORED = `
if redis.call('GETBIT', KEYS[1], ARGV[2]) == 1 then return 0 end
redis.call('HSET', KEYS[3], ARGV[1], ARGV[3])
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
return 1
`;

/**
 * The trainer's commit.
 * KEYS: state (hash), scored, scoredData, consumedGroups (bitmap), trainedEpisodes (bitmap), batches
 *       (list), attempts (hash), trash (list), weights (zset)
 * ARGV: expectedVersion, newVersion, weightsKey ('' = unchanged), planJson
 *       ({trained: [{id, seq, size}], dropped: [...], slots: [episode slots of the trajectories trained on]}),
 *       batchJson ('' = none), channel, runId, keepBatches, batchEpisodes, batchRewardSum, batchCorrect
 * Every consumed group's stored trajectory attempts move to the trash list (the trainer deletes
 * them). Duplicates are counted from `slots` — what was actually trained — against the
 * trained-episodes bitmap, independently of the group bookkeeping above them.
 * Returns the number of duplicate episodes, or an error 'STALE <version>'.
 */
export const COMMIT = `
local version = tonumber(redis.call('HGET', KEYS[1], 'version') or '0')
if version ~= tonumber(ARGV[1]) then return redis.error_reply('STALE ' .. version) end
local plan = cjson.decode(ARGV[4])
local consumedEpisodes = 0
local function consume(group)
  redis.call('ZREM', KEYS[2], group.id)
  redis.call('HDEL', KEYS[3], group.id)
  if redis.call('SETBIT', KEYS[4], group.seq, 1) == 1 then return false end
  consumedEpisodes = consumedEpisodes + group.size
  local listed = redis.call('HGET', KEYS[7], tostring(group.seq))
  if listed then
    for key in string.gmatch(listed, '[^\\n]+') do redis.call('RPUSH', KEYS[8], key) end
    redis.call('HDEL', KEYS[7], tostring(group.seq))
  end
  return true
end
local trained = 0
local dropped = 0
for _, group in ipairs(plan.trained) do if consume(group) then trained = trained + 1 end end
for _, group in ipairs(plan.dropped) do if consume(group) then dropped = dropped + 1 end end
local duplicates = 0
for _, slot in ipairs(plan.slots) do
  if redis.call('SETBIT', KEYS[5], slot, 1) == 1 then duplicates = duplicates + 1 end
end
redis.call('HINCRBY', KEYS[1], 'trained_groups', trained)
redis.call('HINCRBY', KEYS[1], 'dropped_groups', dropped)
redis.call('HINCRBY', KEYS[1], 'consumed_episodes', consumedEpisodes)
redis.call('HINCRBY', KEYS[1], 'duplicate_trajectories', duplicates)
redis.call('HSET', KEYS[1], 'version', ARGV[2])
if ARGV[3] ~= '' then
  redis.call('HSET', KEYS[1], 'weights_key', ARGV[3])
  redis.call('ZADD', KEYS[9], ARGV[2], ARGV[3])
end
if ARGV[5] ~= '' then
  redis.call('RPUSH', KEYS[6], ARGV[5])
  redis.call('LTRIM', KEYS[6], -tonumber(ARGV[8]), -1)
  redis.call('HINCRBY', KEYS[1], 'batches', 1)
  redis.call('HINCRBY', KEYS[1], 'trained_episodes', ARGV[9])
  redis.call('HINCRBYFLOAT', KEYS[1], 'trained_reward_sum', ARGV[10])
  redis.call('HINCRBY', KEYS[1], 'trained_correct', ARGV[11])
end
local weights = redis.call('HGET', KEYS[1], 'weights_key')
local kind = 'consumed'
if #plan.trained > 0 then kind = 'version' end
redis.call('PUBLISH', ARGV[6], cjson.encode({run_id = ARGV[7], kind = kind, version = tonumber(ARGV[2]), weights_key = weights or cjson.null}))
return duplicates
`;

/**
 * Move the admitted counter forward to seq + 1 (never back: re-admitting an
 * old seq after a restart is a no-op).
 * KEYS: state; ARGV: admittedCount
 */
export const ADVANCE_ADMITTED = `
local current = tonumber(redis.call('HGET', KEYS[1], 'admitted') or '0')
if tonumber(ARGV[1]) > current then redis.call('HSET', KEYS[1], 'admitted', ARGV[1]) end
return 1
`;

/**
 * Take a lease (the run's trainer lease) for ARGV[2] ms, or renew it for the owner that holds it.
 * KEYS: lease; ARGV: owner, ttlMs
 * Returns 1 when this owner holds the lease now, 0 when another does.
 */
export const ACQUIRE_LEASE = `
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
`;

/**
 * Give a lease up, only if this owner still holds it (a lease that expired and was taken by another
 * trainer is left alone).
 * KEYS: lease; ARGV: owner
 */
export const RELEASE_LEASE = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`;

/** A client with the scripts above defined as commands. */
export type ScriptRedis = Redis & {
  sqlenvStoreTrajectory(trajectoryKey: string, completed: string, consumedGroups: string, attempts: string, state: string, value: Buffer, slot: number, groupSeq: number, blobKey: string): Promise<number>;
  sqlenvRecordScored(consumedGroups: string, scored: string, scoredData: string, groupId: string, seq: number, json: string): Promise<number>;
  sqlenvCommit(
    state: string,
    scored: string,
    scoredData: string,
    consumedGroups: string,
    trainedEpisodes: string,
    batches: string,
    attempts: string,
    trash: string,
    weights: string,
    expected: number,
    next: number,
    weightsKey: string,
    plan: string,
    batch: string,
    channel: string,
    runId: string,
    keepBatches: number,
    batchEpisodes: number,
    batchRewardSum: number,
    batchCorrect: number,
  ): Promise<number>;
  sqlenvAdvanceAdmitted(state: string, count: number): Promise<number>;
  sqlenvAcquireLease(lease: string, owner: string, ttlMs: number): Promise<number>;
  sqlenvReleaseLease(lease: string, owner: string): Promise<number>;
};

/** Define the scripts on a client (ioredis loads each once, then calls it by SHA). */
export function defineScripts(redis: Redis): ScriptRedis {
  redis.defineCommand('sqlenvStoreTrajectory', { numberOfKeys: 5, lua: STORE_TRAJECTORY });
  redis.defineCommand('sqlenvRecordScored', { numberOfKeys: 3, lua: RECORD_SCORED });
  redis.defineCommand('sqlenvCommit', { numberOfKeys: 9, lua: COMMIT });
  redis.defineCommand('sqlenvAdvanceAdmitted', { numberOfKeys: 1, lua: ADVANCE_ADMITTED });
  redis.defineCommand('sqlenvAcquireLease', { numberOfKeys: 1, lua: ACQUIRE_LEASE });
  redis.defineCommand('sqlenvReleaseLease', { numberOfKeys: 1, lua: RELEASE_LEASE });
  return redis as ScriptRedis;
}
