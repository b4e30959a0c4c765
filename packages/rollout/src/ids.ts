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
