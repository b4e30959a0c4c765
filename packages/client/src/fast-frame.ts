import type { ObservationFrame } from '@sqlenv/protocol';

/**
 * A precompiled check for the reply a client reads on every reset and step:
 * `{type: 'observation', data: {observation, reward, done}}`, exactly as
 * ObservationFrameSchema (strict objects all the way down) accepts it.
 * Returns the frame when the schema would certainly accept it (the schema's
 * output is a copy with the same content); undefined sends it through zod.
 */

const observationKeys = ['question', 'schema_info', 'result', 'error', 'step_count', 'budget_remaining', 'action_history'] as const;

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function hasExactly(record: Record<string, unknown>, keys: readonly string[]): boolean {
  if (Object.keys(record).length !== keys.length) return false;
  for (const key of keys) if (!Object.hasOwn(record, key)) return false;
  return true;
}

function isCount(value: unknown): boolean {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;
}

export function fastObservationFrame(json: unknown): ObservationFrame | undefined {
  if (!isRecord(json) || json['type'] !== 'observation' || !hasExactly(json, ['type', 'data'])) return undefined;
  const data = json['data'];
  if (!isRecord(data) || !hasExactly(data, ['observation', 'reward', 'done'])) return undefined;
  const reward = data['reward'];
  if (reward !== null && !(typeof reward === 'number' && Number.isFinite(reward))) return undefined;
  if (typeof data['done'] !== 'boolean') return undefined;
  const obs = data['observation'];
  if (!isRecord(obs) || !hasExactly(obs, observationKeys)) return undefined;
  if (typeof obs['question'] !== 'string' || typeof obs['schema_info'] !== 'string' || typeof obs['result'] !== 'string' || typeof obs['error'] !== 'string') return undefined;
  if (!isCount(obs['step_count']) || !isCount(obs['budget_remaining'])) return undefined;
  const history = obs['action_history'];
  if (!Array.isArray(history)) return undefined;
  for (const entry of history) if (typeof entry !== 'string') return undefined;
  return json as ObservationFrame;
}
