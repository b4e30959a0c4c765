/**
 * `npm run bench`: lists the benches (`npm run bench:<name>`), each with the first line of its header;
 * a bench's header says its settings and its smallest run.
 */
import { benchEntries } from './lib/bench-index.ts';
import { repoRoot } from './lib/harness.ts';

const entries = benchEntries(repoRoot);
const width = Math.max(...entries.map((e) => e.script.length));
process.stdout.write(`${entries.map((e) => `npm run ${e.script.padEnd(width)}  ${e.summary}`).join('\n')}\n\nResults: bench/results/README.md. Set BENCH_RESULTS_DIR to write them elsewhere.\n`);
