import { executionUsage } from '../execution-flags.ts';

/** Remote sampling on vLLM-compatible servers (commands/inference-options.ts). */
const inferenceUsage = '[--inference-url URL[,URL...] [--inference-api-key KEY] [--inference-model NAME] [--inference-concurrency N]]';
const adapterShareUsage = '[--adapter-share DIR [--adapter-share-as PATH]]';

/**
 * Every command's usage, in one module that loads nothing: `sqlenv --help` and `sqlenv <command>
 * --help` print it without importing the command (whose module may load ONNX Runtime or BullMQ).
 */
export const coordinatorUsage =
  'sqlenv coordinator --redis URL --run ID --dataset builtin|DIR [--skip-missing-dbs] --policy oracle|random|model [--model DIR ...model options] --episodes N --group-size G [--groups-per-batch B] [--max-staleness S] [--seed N] [--attempts N] [--metrics-port P [--metrics-host 127.0.0.1|0.0.0.0]]';

export const datasetsUsage =
  'sqlenv datasets check <dir> [--json] | sqlenv datasets builtin --out DIR [--seed S] [--extra-train-per-instance N [--extra-train-only]] [--extra-dev-per-instance N] [--fresh-values]';

export const evalUsage =
  `sqlenv eval [--policy oracle|random|model] [--dataset builtin|<dir> [--skip-missing-dbs]] [--split train|dev]
            [--episodes N|all] [--seeds K] [--seed S] [--concurrency C] [--url ws://host:port] [--mode eval|train] [--json] [--verbose]
            [--model DIR [--adapter DIR] [--prompt FILE] [--temperature T] [--top-p P] [--top-k K]
             [--max-new-tokens N] [--context-tokens N] [--thinking] [--trajectories F.jsonl] ${executionUsage}
             ${inferenceUsage}]
            [--save-eval RUN_DIR --eval-name NAME [--eval-version N] [--force]] [--deterministic|--no-deterministic]`;

export const learnUsage =
  `sqlenv learn [--model DIR] [--dataset builtin-heldout|builtin|DIR [--skip-missing-dbs]] [--run-dir DIR] [--seed S]
            [--sft-steps N] [--sft-lr X] [--sft-batch-size B] [--sft-mode full|lora]
            [--episodes N] [--group-size G] [--groups-per-batch B] [--max-staleness S] [--temperature T] [--lr X] [--lora-rank R]
            [--max-new-tokens N] [--concurrency C] [--advantage grpo|dr_grpo] [--negative-weight λ] [--reward JSON] [--tis-cap C] [--learner JSON] [--eval-seeds K] [--eval-questions N|all] [--deterministic] [--redis URL [--local-worker true|false]]
            ${executionUsage} ${inferenceUsage} ${adapterShareUsage}`;

export const modelUsage =
  `sqlenv model init --config <preset|json|file> --out DIR [--seed S] [--dtype F32|F16|BF16] [--tokenizer DIR] [--force]
            sqlenv model tokenizer --data F.jsonl --out DIR [--vocab-size N] [--split-words true|false|isolated] [--model DIR]
            sqlenv model logits --model DIR --tokens 1,2,3 [--adapter DIR] [--json] ${executionUsage}
            sqlenv model generate --model DIR --prompt "..." [--adapter DIR] [--max-new-tokens N] [--temperature T] [--top-p P] [--top-k K] [--seed S] [--raw] [--json] ${executionUsage}`;

export const playUsage =
  `sqlenv play [--dataset builtin|<dir> [--skip-missing-dbs]] [--split train|dev] [--question-id Q] [--seed S]
            [--actions FILE.jsonl --json]
            sqlenv play --policy model --model DIR [--adapter DIR] [--temperature T] [--max-new-tokens N] ${executionUsage} ${inferenceUsage} ... [--json]`;

export const reportUsage = 'sqlenv report RUN_DIR';

export const runsUsage =
  'sqlenv runs list|show RUN|delete RUN [--force]|checkpoint RUN NAME [--version V] [--redis URL] [--key-base B] [--json]';

export const serveModelUsage =
  `sqlenv serve-model --model DIR [--adapter DIR] [--port 8001] [--host 127.0.0.1] [--api-key KEY] [--served-model-name NAME]
            [--max-loras 4] [--lora-rank R] [--lora-alpha A] [--lora-targets q_proj,...] [--max-batch-size 32] [--max-pending-requests N]
            [--max-model-len N] [--top-k K] [--replicas N] [--log-level info] ${executionUsage}`;

export const sftDataUsage =
  `sqlenv sft-data --model DIR --out F.jsonl [--dataset builtin|<dir> [--skip-missing-dbs]] [--split train|dev] [--episodes N|all]
            [--format ids|messages] [--prompt FILE] [--thinking] [--context-tokens N] [--seed S]`;

export const sftUsage =
  `sqlenv sft --model DIR --data F.jsonl --steps N --out DIR [--adapter-init DIR] [--lr X] [--optimizer adamw|sgd]
            [--schedule constant|cosine] [--warmup-steps W] [--min-lr-ratio R] [--weight-decay D]
            [--batch-size B] [--lora-rank R] [--lora-alpha A] [--lora-targets q_proj,...] [--micro-batch-tokens T] [--seed S] [--thinking]
            [--shuffle] [--full]   (every base weight instead of an adapter; --out is then a model directory) [--force]
            [--checkpoint-every N] [--resume]   (state every N steps in OUT/checkpoint/; --resume continues from it)
            [--eval-data F.jsonl --eval-every N]   (held-out loss before the first step, every N steps and after the last)
            [--execution-provider cpu|cuda|webgpu] [--device-id D] [--threads N]`;

export const trainUsage =
  `sqlenv train [--dataset builtin|DIR [--skip-missing-dbs]] [--policy random|oracle|model] [--model DIR] [--adapter DIR] [--prompt FILE] [--temperature T] [--max-new-tokens N] [--context-tokens N] [--episodes N] [--group-size G] [--groups-per-batch B] [--max-staleness S] [--tis-cap C] [--concurrency C] [--execution-provider cpu|cuda|webgpu] [--threads N] [--run-dir DIR] [--save-every N] [--eval-episodes N|all] [--eval-seeds K] [--eval-temperature T] [--eval-split dev|train] [--eval-seed S] [--deterministic] [--redis URL [--local-worker true|false]] [--progress auto|bar|lines|off] [--json] ${inferenceUsage} ${adapterShareUsage}`;

export const trainerUsage =
  'sqlenv trainer --redis URL [--run ID] [--model DIR] [--tis-cap C] [--execution-provider cpu|cuda|webgpu] [--threads N] [--keep-weights K] [--checkpoint-every N] [--run-dir DIR [--save-every N]] [--adapter-share DIR] [--metrics-port P [--metrics-host 127.0.0.1|0.0.0.0]]';

export const workerUsage =
  `sqlenv worker --redis URL [--run ID] [--concurrency C] [--skip-missing-dbs] [--model DIR] [--execution-provider cpu|cuda|webgpu] [--threads N] ${inferenceUsage} ${adapterShareUsage} [--env-url ws://HOST:8000] [--metrics-port P [--metrics-host 127.0.0.1|0.0.0.0]]`;

/** `sqlenv serve --help`: the long form (serveUsage is its line in `sqlenv --help`). */
export const SERVE_USAGE = `Usage: sqlenv serve [options]

Serve the SQL environment over the OpenEnv protocol (HTTP + WebSocket /ws, /web, /docs).

Options:
  --port <n>             port to listen on (default 8000; env PORT)
  --host <addr>          address to bind (default 127.0.0.1; env HOST; 0.0.0.0 exposes it)
  --dataset <builtin|dir> builtin dataset or a Spider-layout directory (env SQLENV_DATASET)
  --cache-dir <dir>      where the builtin dataset is generated (env SQLENV_CACHE_DIR)
  --skip-missing-dbs     serve without databases whose file is missing or empty, listing them;
                         without it such a dataset is refused (env SQLENV_SKIP_MISSING_DBS=1)
  --api-key <key>        require "Authorization: Bearer <key>" (env SQLENV_API_KEY)
  --mode <eval|train>    eval (default): clients see only the terminal reward; train: the shaped
                         reward RL trainers need (env SQLENV_MODE)
  --allowed-hosts <list> host names served besides loopback names and IP literals, comma-separated;
                         .name adds subdomains, * allows any (env SQLENV_ALLOWED_HOSTS)
  --max-sessions <n>     concurrent sessions, WebSocket + HTTP (default 1024; env SQLENV_MAX_SESSIONS)
  --idle-timeout-s <s>   reap sessions idle this long, 0 = never (default 600; env SQLENV_IDLE_TIMEOUT_S)
  --no-web               do not serve the /web page (env SQLENV_WEB=0)
  --log-level <level>    pino level (default info; env LOG_LEVEL)
  -h, --help             show this help
`;

export const serveUsage = 'sqlenv serve [--port 8000] [--host 127.0.0.1] [--dataset builtin|<dir>] [--api-key K] [--mode eval|train] [--allowed-hosts H,...] (sqlenv serve --help)';
