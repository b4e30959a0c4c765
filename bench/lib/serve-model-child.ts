/**
 * `sqlenv serve-model` as a bench's child process: started on a free port, its served model and
 * engine counters read over HTTP, stopped with SIGTERM (which lets it finish what is in flight).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import type { EngineStats } from '@sqlenv/model';
import { listeningUrlOf } from '@sqlenv/model-server';
import { repoRoot, sqlenvBin } from './repo-paths.ts';

export interface ServeModelChild {
  readonly url: string;
  /** The base model's served name. */
  readonly model: string;
  /** The engine counters of `/metrics` (`sqlenv_model_server_engine_stat`), since the server started. */
  engineStats(): Promise<Partial<EngineStats>>;
  /** SIGTERM, resolved once the process has exited. */
  stop(): Promise<void>;
}

function waitForListening(child: ChildProcess): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    child.once('exit', (code, signal) => reject(new Error(`serve-model exited (code ${code}, signal ${signal}) before listening`)));
    // The reader stays attached after the line: the server's later log lines must not fill the pipe.
    createInterface({ input: child.stdout as NodeJS.ReadableStream }).on('line', (line) => {
      const url = listeningUrlOf(line);
      if (url !== undefined) resolve(url);
    });
  });
}

/** Parses Prometheus text for the engine counters. */
export function engineStatsOf(metricsText: string): Partial<EngineStats> {
  return Object.fromEntries([...metricsText.matchAll(/^sqlenv_model_server_engine_stat\{stat="(\w+)"\} (\S+)$/gm)].map((m) => [m[1], Number(m[2])]));
}

/** Starts `sqlenv serve-model --port 0 <flags>` and resolves once it listens and lists its model. */
export async function startServeModel(flags: readonly string[]): Promise<ServeModelChild> {
  const child = spawn(process.execPath, [sqlenvBin, 'serve-model', '--port', '0', ...flags], { cwd: repoRoot, stdio: ['ignore', 'pipe', 'inherit'] });
  const exited = new Promise<void>((done) => child.once('exit', () => done()));
  let url: string;
  try {
    url = await waitForListening(child);
  } catch (error) {
    child.kill('SIGTERM');
    throw error;
  }
  const models = (await (await fetch(`${url}/v1/models`)).json()) as { data: { id: string }[] };
  return {
    url,
    model: models.data[0]?.id ?? '',
    engineStats: async () => engineStatsOf(await (await fetch(`${url}/metrics`)).text()),
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}
