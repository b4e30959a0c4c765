import type { Redis } from 'ioredis';

/**
 * Lua scripts of the BullMQ transport. Each runs atomically in Redis, which is
 * what makes the trainer's consumption exactly-once: a group leaves the scored
 * buffer, joins the consumed set, and the version moves — all or nothing.
 * All keys of one run share the `{run}` hash tag, so the scripts also run on
 * Redis Cluster.
 */

/**
 * Record a scored group unless the trainer already consumed it (a group job
 * re-run after a stall must not bring a consumed group back).
 * KEYS: consumed, scored (zset seq → group id), scoredData (hash group id → JSON)
 * ARGV: groupId, seq, scoredJson
 */
export const RECORD_SCORED = `
if redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 1 then return 0 end
redis.call('HSET', KEYS[3], ARGV[1], ARGV[3])
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
return 1
`;

/**
 * The trainer's commit.
 * KEYS: state (hash), scored, scoredData, consumed, consumedEpisodes, batches (list)
 * ARGV: expectedVersion, newVersion, weightsKey ('' = unchanged), planJson
 *       ({trained: [{id, episodes}], dropped: [...]}), batchJson ('' = none), channel, runId
 * Returns the number of duplicate episode ids, or an error 'STALE <version>'.
 */
export const COMMIT = `
local version = tonumber(redis.call('HGET', KEYS[1], 'version') or '0')
if version ~= tonumber(ARGV[1]) then return redis.error_reply('STALE ' .. version) end
local plan = cjson.decode(ARGV[4])
local duplicates = 0
local function consume(group)
  redis.call('ZREM', KEYS[2], group.id)
  redis.call('HDEL', KEYS[3], group.id)
  if redis.call('SADD', KEYS[4], group.id) == 0 then return false end
  for _, episode in ipairs(group.episodes) do
    if redis.call('SADD', KEYS[5], episode) == 0 then duplicates = duplicates + 1 end
  end
  return true
end
local trained = 0
local dropped = 0
for _, group in ipairs(plan.trained) do if consume(group) then trained = trained + 1 end end
for _, group in ipairs(plan.dropped) do if consume(group) then dropped = dropped + 1 end end
redis.call('HINCRBY', KEYS[1], 'trained_groups', trained)
redis.call('HINCRBY', KEYS[1], 'dropped_groups', dropped)
redis.call('HINCRBY', KEYS[1], 'duplicate_trajectories', duplicates)
redis.call('HSET', KEYS[1], 'version', ARGV[2])
if ARGV[3] ~= '' then redis.call('HSET', KEYS[1], 'weights_key', ARGV[3]) end
if ARGV[5] ~= '' then redis.call('RPUSH', KEYS[6], ARGV[5]) end
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

/** A client with the scripts above defined as commands. */
export type ScriptRedis = Redis & {
  sqlenvRecordScored(consumed: string, scored: string, scoredData: string, groupId: string, seq: number, json: string): Promise<number>;
  sqlenvCommit(
    state: string,
    scored: string,
    scoredData: string,
    consumed: string,
    consumedEpisodes: string,
    batches: string,
    expected: number,
    next: number,
    weightsKey: string,
    plan: string,
    batch: string,
    channel: string,
    runId: string,
  ): Promise<number>;
  sqlenvAdvanceAdmitted(state: string, count: number): Promise<number>;
};

/** Define the scripts on a client (ioredis loads each once, then calls it by SHA). */
export function defineScripts(redis: Redis): ScriptRedis {
  redis.defineCommand('sqlenvRecordScored', { numberOfKeys: 3, lua: RECORD_SCORED });
  redis.defineCommand('sqlenvCommit', { numberOfKeys: 6, lua: COMMIT });
  redis.defineCommand('sqlenvAdvanceAdmitted', { numberOfKeys: 1, lua: ADVANCE_ADMITTED });
  return redis as ScriptRedis;
}
