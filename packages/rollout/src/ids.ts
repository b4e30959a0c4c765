/**
 * Deterministic ids. Everything derives from (run, seq, index) so a retry, a
 * stalled-job recovery or a coordinator restart that re-admits a group
 * produces the very same job ids, and BullMQ refuses the duplicate.
 *
 * Separator: '.', never ':' — BullMQ's Lua scripts find a job id as the text
 * after the last ':' of its Redis key.
 */

/** Nominal position of a group: the step a synchronous schedule would admit it for, and its slot there. */
export function groupPosition(seq: number, groupsPerBatch: number): { step: number; group: number } {
  return { step: Math.floor(seq / groupsPerBatch), group: seq % groupsPerBatch };
}

/** `{run}.s{step}.g{group}` */
export function groupJobId(runId: string, seq: number, groupsPerBatch: number): string {
  const { step, group } = groupPosition(seq, groupsPerBatch);
  return `${runId}.s${step}.g${group}`;
}

/** `{run}.s{step}.g{group}.e{i}`: the episode id and its job id. */
export function episodeJobId(runId: string, seq: number, groupsPerBatch: number, index: number): string {
  return `${groupJobId(runId, seq, groupsPerBatch)}.e${index}`;
}

/**
 * The admission seq and index of an episode id (the inverse of episodeJobId), or undefined when the
 * id is not one of the run's. The trainer reads it from each trajectory it trains on: the duplicate
 * check counts what was trained, not what the group records say.
 */
export function parseEpisodeJobId(runId: string, episodeId: string, groupsPerBatch: number): { seq: number; index: number } | undefined {
  if (!episodeId.startsWith(`${runId}.`)) return undefined;
  const match = /^\.s(\d+)\.g(\d+)\.e(\d+)$/.exec(episodeId.slice(runId.length));
  if (!match) return undefined;
  const [step, group, index] = [Number(match[1]), Number(match[2]), Number(match[3])];
  if (group >= groupsPerBatch) return undefined;
  return { seq: step * groupsPerBatch + group, index };
}
