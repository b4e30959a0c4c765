import { createWriteStream } from 'node:fs';
import { z } from 'zod';
import { LlmPolicy, loadAgentPrompt, OraclePolicy, PolicyCompletionSource, runEpisode, type LlmEpisode } from '@sqlenv/agents';
import { RunModelSpecSchema, sequenceFromTurns, SplitName } from '@sqlenv/protocol';
import { episodesFlag, intFlag, parseFlags, positiveIntFlag } from '../flags.ts';
import { DatasetFlags, datasetFlagOptions, openSqlRuntime } from '../dataset-flags.ts';
import type { CommandIo } from '../io.ts';
import { selectQuestionIds } from '../select-questions.ts';

const SftDataFlags = DatasetFlags.extend({
  dataset: z.string().min(1).default('builtin'),
  split: SplitName.optional(),
  model: z.string().min(1),
  out: z.string().min(1),
  episodes: episodesFlag.default('all'),
  seed: intFlag.default(0),
  format: z.enum(['ids', 'messages']).default('ids'),
  prompt: z.string().min(1).optional(),
  thinking: z.boolean().default(false),
  'context-tokens': positiveIntFlag.optional(),
});
export type SftDataFlags = z.infer<typeof SftDataFlags>;

export interface SftDataSummary {
  lines: number;
  /** Questions left out: the oracle's episode did not fit the context or did not end correct. */
  skipped: Array<{ question_id: string; reason: string }>;
  meanTokens: number;
  maxTokens: number;
}

/**
 * `sqlenv sft-data`: the oracle's episodes written as the LLM agent would have
 * written them — its actions as tool calls (the agent's own rendering), the
 * environment's real observations as tool responses — through the agent's own
 * code (LlmPolicy with the oracle as its completion source). Each line is
 * `{"input_ids": [...], "loss_mask": [...]}` (loss_mask 1 exactly on the
 * assistant's tokens, closing `<|im_end|>` included: the ids the agent would
 * have sampled), or with `--format messages` `{"messages": [...], "tools": [...]}`.
 */
export async function sftDataCommand(argv: string[], io: CommandIo): Promise<number> {
  const { flags } = parseFlags(
    argv,
    {
      dataset: { type: 'string' },
      split: { type: 'string' },
      model: { type: 'string' },
      out: { type: 'string' },
      episodes: { type: 'string' },
      seed: { type: 'string' },
      format: { type: 'string' },
      prompt: { type: 'string' },
      thinking: { type: 'boolean' },
      'context-tokens': { type: 'string' },
      ...datasetFlagOptions,
    },
    SftDataFlags,
    { env: io.env ?? {} },
  );
  const summary = await writeSftData(flags, io);
  io.stdout.write(
    `wrote ${summary.lines} oracle episodes to ${flags.out} (${flags.format}); tokens per episode: mean ${summary.meanTokens.toFixed(0)}, max ${summary.maxTokens}` +
      `${summary.skipped.length > 0 ? `; skipped ${summary.skipped.length} (e.g. ${summary.skipped[0]?.question_id}: ${summary.skipped[0]?.reason})` : ''}\n`,
  );
  return 0;
}

export async function writeSftData(flags: SftDataFlags, io: Pick<CommandIo, 'logger'> & Partial<Pick<CommandIo, 'stderr'>>): Promise<SftDataSummary> {
  const model = await import('@sqlenv/model');
  const config = model.readModelConfig(flags.model);
  const chat = await model.loadChatFormat(flags.model, { thinking: flags.thinking, config });
  const prompt = loadAgentPrompt(flags.prompt);
  const runtime = await openSqlRuntime({ dataset: flags.dataset }, flags['skip-missing-dbs'] === true, io);
  const out = createWriteStream(flags.out);
  const summary: SftDataSummary = { lines: 0, skipped: [], meanTokens: 0, maxTokens: 0 };
  try {
    const dataset = runtime.dataset;
    // The same budget as a model run's (the run spec's default), so every line fits what the agent will see.
    const budget = flags['context-tokens'] ?? RunModelSpecSchema.shape.context_tokens.parse(undefined) ?? config.maxPositionEmbeddings;
    const contextTokens = Math.min(budget, config.maxPositionEmbeddings);
    const policy = new LlmPolicy({ chat, prompt, source: new PolicyCompletionSource(new OraclePolicy(dataset), prompt, chat), maxNewTokens: contextTokens, contextTokens, name: 'oracle-sft' });
    const questionIds = selectQuestionIds(dataset, { split: flags.split, episodes: flags.episodes, seed: flags.seed });
    let totalTokens = 0;
    for (const [index, questionId] of questionIds.entries()) {
      const env = runtime.createEnvironment();
      try {
        const first = await env.reset({ question_id: questionId, seed: flags.seed + index });
        const question = dataset.question(questionId);
        const actor = policy.begin({ episodeId: `sft-${index}`, questionId, dbId: question?.database_name ?? '', seed: flags.seed + index }) as LlmEpisode;
        const run = await runEpisode(env, actor, first.observation, { maxTurns: 100, policyVersion: () => 0 });
        if (!run.outcome.correct) {
          const reason = run.outcome.done_reason === 'answered' ? 'the oracle answer was judged wrong' : run.outcome.done_reason === 'context_exhausted' || run.turns.some((t) => t.parse_error !== null) ? `over the ${contextTokens}-token context` : run.outcome.done_reason;
          summary.skipped.push({ question_id: questionId, reason });
          continue;
        }
        const sequence = sequenceFromTurns(run.turns, null, questionId);
        const line = flags.format === 'ids' ? { input_ids: sequence.input_ids, loss_mask: sequence.loss_mask } : { messages: actor.messages, tools: policy.tools };
        out.write(`${JSON.stringify(line)}\n`);
        summary.lines += 1;
        totalTokens += sequence.input_ids.length;
        summary.maxTokens = Math.max(summary.maxTokens, sequence.input_ids.length);
      } finally {
        env.close();
      }
    }
    summary.meanTokens = summary.lines === 0 ? 0 : totalTokens / summary.lines;
    return summary;
  } finally {
    await new Promise<void>((resolve) => out.end(resolve));
    await runtime.close();
  }
}
