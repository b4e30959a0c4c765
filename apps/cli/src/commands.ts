import type { CommandIo } from './io.ts';
import { evalCommand, evalUsage } from './commands/eval.ts';
import { playCommand, playUsage } from './commands/play.ts';
import { datasetsCommand, datasetsUsage } from './commands/datasets.ts';
import type * as rollout from '@sqlenv/rollout';
import { coordinatorUsage, reportUsage, runsUsage, sftUsage, trainerUsage, trainUsage, workerUsage } from '@sqlenv/rollout';
import { withShutdownSignal } from '@sqlenv/shared';
import { modelCommand, modelUsage } from './commands/model.ts';
import { sftDataCommand, sftDataUsage } from './commands/sft-data.ts';
import { learnUsage } from './commands/learn.ts';

export interface Command {
  summary: string;
  usage: string;
  /** Sub-commands (`model init`, `runs delete`): `--help` after any of them prints the usage too. */
  subcommands?: readonly string[];
  /** The command prints its own, longer `--help` (sqlenv serve); otherwise main() prints `usage`. */
  ownHelp?: boolean;
  run(argv: string[], io: CommandIo): Promise<number>;
}

/** Every sub-command of `sqlenv`. Command bodies are imported lazily: `sqlenv eval` never starts a server or loads ONNX Runtime. */
export const commands: Record<string, Command> = {
  eval: { summary: 'evaluate a policy (oracle, random, or a model) on a dataset', usage: evalUsage, run: evalCommand },
  play: { summary: 'play one episode in the terminal (or a scripted one)', usage: playUsage, run: playCommand },
  datasets: { summary: 'validate a Spider-layout dataset directory', usage: datasetsUsage, subcommands: ['check', 'builtin'], run: datasetsCommand },
  serve: {
    ownHelp: true,
    summary: 'run the OpenEnv-compatible server (WebSocket /ws, HTTP, /web, /docs)',
    usage: 'sqlenv serve [--port 8000] [--host 127.0.0.1] [--dataset builtin|<dir>] [--api-key K] [--mode eval|train] [--allowed-hosts H,...] (sqlenv serve --help)',
    run: async (argv, io) => {
      const { serveCommand } = await import('@sqlenv/env-server');
      return serveCommand(argv, { stdout: (text) => void io.stdout.write(text), stderr: (text) => void io.stderr.write(text) });
    },
  },
  model: { summary: 'write random checkpoints, print logits, generate text (ONNX Runtime)', usage: modelUsage, subcommands: ['init', 'tokenizer', 'logits', 'generate'], run: modelCommand },
  'sft-data': { summary: "write the oracle's episodes as SFT data in the LLM agent's prompt and tool-call format", usage: sftDataUsage, run: sftDataCommand },
  sft: rolloutCommand('supervised fine-tuning of a LoRA adapter on assistant tokens (writes a PEFT adapter directory)', sftUsage, (m) => m.sftCommand),
  learn: {
    summary: 'the learning run npm start runs: SFT warm start, held-out eval, GRPO, eval again, report (one JSON line)',
    usage: learnUsage,
    run: async (argv, io) => (await import('./commands/learn.ts')).learnCommand(argv, io),
  },
  train: rolloutCommand('embedded run: coordinator, workers and trainer in one process (no Redis)', trainUsage, (m) => m.trainCommand),
  coordinator: rolloutCommand('distributed run: admit GRPO groups into Redis and report the run', coordinatorUsage, (m) => m.coordinatorCommand),
  worker: rolloutCommand('distributed run: play episode jobs from Redis until SIGTERM', workerUsage, (m) => m.workerCommand),
  trainer: rolloutCommand('distributed run: consume scored groups, update and publish the policy', trainerUsage, (m) => m.trainerCommand),
  report: rolloutCommand('rebuild a run directory\'s report.html from metrics.jsonl and evals/', reportUsage, (m) => m.reportCommand),
  runs: { ...rolloutCommand('distributed runs in Redis: list, show, delete, pin a checkpoint', runsUsage, (m) => m.runsCommand), subcommands: ['list', 'show', 'delete', 'checkpoint'] },
};


/** A rollout app's command: loaded on use, with SIGTERM/SIGINT turned into its abort signal. */
function rolloutCommand(summary: string, usage: string, pick: (module: typeof rollout) => typeof rollout.trainCommand): Command {
  return {
    summary,
    usage,
    run: async (argv, io) => {
      const command = pick(await import('@sqlenv/rollout'));
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
