/**
 * Benches that measure in a child process of their own (peak RSS, a fresh ONNX Runtime, no JIT
 * warmth carried over): the parent passes a JSON payload in BENCH_CHILD, the child answers with one
 * `BENCH_RESULT <json>` line on stdout. Its stderr goes to the parent's, for progress.
 */
import { spawnSync } from 'node:child_process';
import { repoRoot } from './repo-paths.ts';

const PAYLOAD_VAR = 'BENCH_CHILD';
const RESULT_PREFIX = 'BENCH_RESULT ';

export interface ChildOptions {
  /** Node flags before the script (`--expose-gc`, `--cpu-prof` ...). */
  execArgv?: readonly string[];
  /** Variables added to the parent's environment. */
  env?: Readonly<Record<string, string>>;
  timeoutMs?: number;
}

/** Runs `node --import tsx <script>` with `payload` and returns the child's result (unchecked: the caller parses it). */
export function runChild(script: string, payload: unknown, options: ChildOptions = {}): unknown {
  const child = spawnSync(process.execPath, [...(options.execArgv ?? []), '--import', 'tsx', script], {
    cwd: repoRoot,
    env: { ...process.env, ...options.env, [PAYLOAD_VAR]: JSON.stringify(payload) },
    encoding: 'utf8',
    maxBuffer: 64 << 20,
    stdio: ['ignore', 'pipe', 'inherit'],
    ...(options.timeoutMs === undefined ? {} : { timeout: options.timeoutMs }),
  });
  const line = child.stdout.split('\n').findLast((l) => l.startsWith(RESULT_PREFIX));
  if (child.status !== 0 || line === undefined) throw new Error(`bench child ${script} ${JSON.stringify(payload)} failed (status ${child.status}, signal ${child.signal})`);
  return JSON.parse(line.slice(RESULT_PREFIX.length)) as unknown;
}

/** In a child: the payload its parent passed; undefined when this process is no bench child. */
export function childPayload(env: NodeJS.ProcessEnv = process.env): unknown {
  const raw = env[PAYLOAD_VAR];
  return raw === undefined ? undefined : (JSON.parse(raw) as unknown);
}

/** In a child: the result line its parent reads. */
export function replyToParent(result: unknown): void {
  process.stdout.write(`${RESULT_PREFIX}${JSON.stringify(result)}\n`);
}
