import { withShutdownSignal } from '@sqlenv/shared';
import type { CommandIo } from './io.ts';
import {
  coordinatorUsage,
  datasetsUsage,
  evalUsage,
  learnUsage,
  modelUsage,
  playUsage,
  reportUsage,
  runsUsage,
  serveModelUsage,
  serveUsage,
  sftDataUsage,
  sftUsage,
  trainerUsage,
  trainUsage,
  workerUsage,
} from './commands/usage.ts';

export interface Command {
  summary: string;
  usage: string;
  /** Sub-commands (`model init`, `runs delete`): `--help` after any of them prints the usage too. */
  subcommands?: readonly string[];
  /** The command prints its own, longer `--help` (sqlenv serve); otherwise main() prints `usage`. */
  ownHelp?: boolean;
  run(argv: string[], io: CommandIo): Promise<number>;
}

/**
 * Every sub-command of `sqlenv`, each handled by apps/cli/src/commands/<name>.ts. A command's module
 * is imported when it runs: `sqlenv eval` never starts a server or loads ONNX Runtime, and
 * `sqlenv report` never loads the queue.
 */
export const commands: Record<string, Command> = {
  eval: { summary: 'evaluate a policy (oracle, random, or a model) on a dataset', usage: evalUsage, run: async (argv, io) => (await import('./commands/eval.ts')).evalCommand(argv, io) },
  play: { summary: 'play one episode in the terminal (or a scripted one)', usage: playUsage, run: async (argv, io) => (await import('./commands/play.ts')).playCommand(argv, io) },
  datasets: { summary: 'validate a Spider-layout dataset directory', usage: datasetsUsage, subcommands: ['check', 'builtin'], run: async (argv, io) => (await import('./commands/datasets.ts')).datasetsCommand(argv, io) },
  serve: {
    ownHelp: true,
    summary: 'run the OpenEnv-compatible server (WebSocket /ws, HTTP, /web, /docs)',
    usage: serveUsage,
    // The server logs at its own --log-level (LOG_LEVEL), not at the CLI's.
    run: async (argv, { logger: _logger, ...io }) => (await import('./commands/serve.ts')).serveCommand(argv, io),
  },
  'serve-model': stoppable(
    "serve a model over vLLM's OpenAI-compatible completions API (/v1/completions, runtime LoRA adapters)",
    serveModelUsage,
    async () => (await import('./commands/serve-model.ts')).serveModelCommand,
  ),
  model: { summary: 'write random checkpoints, print logits, generate text (ONNX Runtime)', usage: modelUsage, subcommands: ['init', 'tokenizer', 'logits', 'generate'], run: async (argv, io) => (await import('./commands/model.ts')).modelCommand(argv, io) },
  'sft-data': { summary: "write the oracle's episodes as SFT data in the LLM agent's prompt and tool-call format", usage: sftDataUsage, run: async (argv, io) => (await import('./commands/sft-data.ts')).sftDataCommand(argv, io) },
  sft: stoppable('supervised fine-tuning of a LoRA adapter on assistant tokens (writes a PEFT adapter directory)', sftUsage, async () => (await import('./commands/sft.ts')).sftCommand),
  learn: stoppable('the learning run npm start runs: SFT warm start, held-out eval, GRPO, eval again, report (one JSON line)', learnUsage, async () => (await import('./commands/learn.ts')).learnCommand),
  train: stoppable('embedded run: coordinator, workers and trainer in one process (no Redis)', trainUsage, async () => (await import('./commands/train.ts')).trainCommand),
  coordinator: stoppable('distributed run: admit GRPO groups into Redis and report the run', coordinatorUsage, async () => (await import('./commands/coordinator.ts')).coordinatorCommand),
  worker: stoppable('distributed run: play episode jobs from Redis until SIGTERM', workerUsage, async () => (await import('./commands/worker.ts')).workerCommand),
  trainer: stoppable('distributed run: consume scored groups, update and publish the policy', trainerUsage, async () => (await import('./commands/trainer.ts')).trainerCommand),
  report: stoppable("rebuild a run directory's report.html from metrics.jsonl and evals/", reportUsage, async () => (await import('./commands/report.ts')).reportCommand),
  runs: { ...stoppable('distributed runs in Redis: list, show, delete, pin a checkpoint', runsUsage, async () => (await import('./commands/runs.ts')).runsCommand), subcommands: ['list', 'show', 'delete', 'checkpoint'] },
};

type Handler = (argv: readonly string[], io: CommandIo) => Promise<number>;

/** A command that reports its own errors (the apps' entry points call it too), with SIGTERM/SIGINT turned into its abort signal. */
function stoppable(summary: string, usage: string, load: () => Promise<Handler>): Command {
  return {
    summary,
    usage,
    run: async (argv, io) => {
      const command = await load();
      return withShutdownSignal((signal) => command(argv, { ...io, env: io.env ?? process.env, signal }));
    },
  };
}

export function usage(): string {
  const lines = ['sqlenv — SQL environment, evaluation and distributed RL training', '', 'Commands:'];
  for (const [name, command] of Object.entries(commands)) lines.push(`  ${name.padEnd(12)} ${command.summary}`);
  lines.push('', 'Usage:');
  for (const command of Object.values(commands)) lines.push(`  ${command.usage}`);
  return `${lines.join('\n')}\n`;
}
