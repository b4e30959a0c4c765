import { createInterface } from 'node:readline/promises';
import { readFile } from 'node:fs/promises';
import { z } from 'zod';
import { SplitName, SqlActionSchema, actionTypes, type SqlAction, type StepResult } from '@sqlenv/protocol';
import { formatZodIssues, silentLogger } from '@sqlenv/shared';
import type { ModelExecution } from '@sqlenv/rollout';
import { runEpisode } from '@sqlenv/agents';
import { intFlag, parseFlags } from '../flags.ts';
import { UsageError } from '../cli-error.ts';
import { DatasetFlags, datasetFlagOptions, openSqlRuntime } from '../dataset-flags.ts';
import type { CommandIo } from '../io.ts';
import { formatTurn, ModelFlags, modelFlagOptions, startModelPolicy } from '../model-policy.ts';
import { startExecution } from '../execution-flags.ts';

const PlayFlags = ModelFlags.extend(DatasetFlags.shape).extend({
  policy: z.enum(['human', 'model']).default('human'),
  dataset: z.string().min(1).default('builtin'),
  split: SplitName.optional(),
  'question-id': z.string().min(1).optional(),
  seed: intFlag.optional(),
  actions: z.string().min(1).optional(),
  json: z.boolean().default(false),
});

/**
 * `sqlenv play`: one episode in the terminal. Interactively, each line is
 * `<TOOL> <argument>` (e.g. `DESCRIBE singer`); with `--actions FILE.jsonl`
 * each line of the file is one action object and, with `--json`, each step
 * result is printed as one JSON line.
 */
export async function playCommand(argv: string[], io: CommandIo): Promise<number> {
  const { flags } = parseFlags(
    argv,
    {
      dataset: { type: 'string' },
      split: { type: 'string' },
      'question-id': { type: 'string' },
      seed: { type: 'string' },
      actions: { type: 'string' },
      json: { type: 'boolean' },
      policy: { type: 'string' },
      ...modelFlagOptions,
      ...datasetFlagOptions,
    },
    PlayFlags,
    { env: io.env ?? {} },
  );
  const execution = await startExecution(flags, io.env ?? {}, io.logger ?? silentLogger, flags.policy === 'model' && flags.inferenceUrl === undefined);
  if (flags.policy === 'model') return playModel(flags, io, execution);
  const scripted = flags.actions === undefined ? undefined : await readActionsFile(flags.actions);
  const runtime = await openSqlRuntime({ dataset: flags.dataset }, flags['skip-missing-dbs'] === true, io);
  const env = runtime.createEnvironment();
  try {
    const resetOptions = {
      ...(flags['question-id'] === undefined ? {} : { question_id: flags['question-id'] }),
      ...(flags.split === undefined ? {} : { split: flags.split }),
      ...(flags.seed === undefined ? {} : { seed: flags.seed }),
    };
    let result: StepResult = await env.reset(resetOptions);
    const show = (r: StepResult): void => {
      if (flags.json) io.stdout.write(`${JSON.stringify({ observation: r.observation, reward: r.reward, done: r.done })}\n`);
      else io.stdout.write(renderObservation(r));
    };
    show(result);
    if (scripted !== undefined) {
      for (const action of scripted) {
        if (result.done) break;
        result = await env.step(action);
        show(result);
      }
      return 0;
    }
    const rl = createInterface({ input: io.stdin ?? process.stdin, output: io.stderr, terminal: io.stderr.isTTY === true });
    try {
      while (!result.done) {
        const line = (await rl.question('action> ').catch(() => null))?.trim();
        if (line === null || line === undefined) break;
        if (line === '') continue;
        const action = parseInteractiveAction(line);
        if (typeof action === 'string') {
          io.stderr.write(`${action}\n`);
          continue;
        }
        result = await env.step(action);
        show(result);
      }
    } finally {
      rl.close();
    }
    return 0;
  } finally {
    env.close();
    await runtime.close();
  }
}

/** The model plays one episode; each turn is printed as it happens (what it wrote, the action, the observation, the reward). */
async function playModel(flags: z.infer<typeof PlayFlags>, io: CommandIo, execution: ModelExecution | undefined): Promise<number> {
  const runtime = await openSqlRuntime({ dataset: flags.dataset }, flags['skip-missing-dbs'] === true, io);
  const env = runtime.createEnvironment();
  const model = await startModelPolicy(flags, { maxBatchSize: 1, logger: io.logger ?? silentLogger, execution }).catch(async (error: unknown) => {
    await runtime.close();
    throw error;
  });
  try {
    const seed = flags.seed ?? 0;
    const first = await env.reset({
      seed,
      ...(flags['question-id'] === undefined ? {} : { question_id: flags['question-id'] }),
      ...(flags.split === undefined ? {} : { split: flags.split }),
    });
    const state = env.state();
    if (!flags.json) io.stdout.write(`Question (${state.question_id ?? '?'}): ${first.observation.question}\n${first.observation.schema_info}\n`);
    const actor = model.policy.begin({ episodeId: state.episode_id ?? 'play', questionId: state.question_id ?? '', dbId: state.db_id ?? '', seed });
    const run = await runEpisode(env, actor, first.observation, {
      maxTurns: 100,
      policyVersion: () => 0,
      onTurn: (event) => {
        if (!flags.json) io.stdout.write(formatTurn(event, 'episode'));
      },
    });
    if (flags.json) io.stdout.write(`${JSON.stringify({ outcome: run.outcome, turns: run.turns, steps: run.steps, sampling: model.sampling })}\n`);
    else io.stdout.write(`Done: ${run.outcome.done_reason}, ${run.outcome.correct ? 'correct' : 'not correct'}, reward ${run.outcome.total_reward.toFixed(3)}, ${run.turns.reduce((n, t) => n + t.prompt_ids.length + t.completion_ids.length, 0)} tokens\n`);
    return 0;
  } finally {
    env.close();
    await model.close();
    await runtime.close();
  }
}

async function readActionsFile(file: string): Promise<SqlAction[]> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    throw new UsageError(`cannot read actions file ${file}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
  }
  const actions: SqlAction[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]?.trim() ?? '';
    if (line === '') continue;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      throw new UsageError(`${file}:${i + 1}: not valid JSON`);
    }
    const parsed = SqlActionSchema.safeParse(value);
    if (!parsed.success) throw new UsageError(`${file}:${i + 1}: invalid action: ${formatZodIssues(parsed.error)}`);
    actions.push(parsed.data);
  }
  return actions;
}

/** `DESCRIBE singer` → action, or a message explaining the expected form. */
export function parseInteractiveAction(line: string): SqlAction | string {
  const match = /^(\w+)\s*([\s\S]*)$/.exec(line);
  const tool = match?.[1]?.toUpperCase();
  if (tool === undefined || !(actionTypes as string[]).includes(tool)) {
    return `expected one of ${actionTypes.join(', ')} followed by its argument, e.g. "DESCRIBE singer"`;
  }
  return { action_type: tool as SqlAction['action_type'], argument: match?.[2]?.trim() ?? '' };
}

function renderObservation(result: StepResult): string {
  const o = result.observation;
  const parts = [
    `\nQuestion: ${o.question}`,
    `Schema:\n${o.schema_info}`,
    o.result === '' ? '' : `Result:\n${o.result}`,
    o.error === '' ? '' : `Error: ${o.error}`,
    `Step ${o.step_count}, budget left ${o.budget_remaining}${result.reward === null ? '' : `, reward ${result.reward.toFixed(3)}`}${result.done ? ', DONE' : ''}`,
  ];
  return `${parts.filter((p) => p !== '').join('\n')}\n`;
}
