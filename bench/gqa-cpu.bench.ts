/**
 * How much memory does ONNX Runtime's CPU GroupQueryAttention (com.microsoft) take for a prompt's
 * attention probabilities? One prompt-phase GQA node at Qwen3-0.6B's head shapes (16 query heads, 8 key/value
 * heads, head dim 128), run once per prompt length in a child process of its own; reports the growth
 * of the process's peak RSS over the run beside the outputs and a full (B, Hq, S, S) float32 buffer.
 * Figures in docs/inference.md ("## Attention"). Writes <results dir>/gqa-cpu.md and .json.
 *
 *   npm run bench:gqa-cpu                                              # 8 rows × 512, 1,024, 2,048 tokens
 *   BENCH_PROMPT_TOKENS=64 BENCH_RESULTS_DIR=/tmp/r npm run bench:gqa-cpu   # smallest
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { InferenceSession, Tensor } from 'onnxruntime-node';
import { encodeModel, type ModelProto, type ValueInfoProto } from '@sqlenv/onnx-graph';
import { childPayload, replyToParent, runChild, startBench } from './lib/harness.ts';

const [HQ, HKV, D] = [16, 8, 128];
const FLOAT = 1;
const INT32 = 6;

function gqaModel(): Uint8Array {
  const io = (name: string, elemType: number, shape: (number | string)[]): ValueInfoProto => ({ name, elemType, shape });
  const model: ModelProto = {
    irVersion: 8,
    producerName: 'gqa-cpu-bench',
    producerVersion: '1',
    opsetImport: [
      { domain: '', version: 17 },
      { domain: 'com.microsoft', version: 1 },
    ],
    graph: {
      name: 'gqa',
      node: [
        {
          name: 'gqa',
          opType: 'GroupQueryAttention',
          domain: 'com.microsoft',
          input: ['query', 'key', 'value', '', '', 'seqlens_k', 'total_sequence_length'],
          output: ['output', 'present_key', 'present_value'],
          attribute: [
            { name: 'num_heads', type: 'int', i: HQ },
            { name: 'kv_num_heads', type: 'int', i: HKV },
          ],
        },
      ],
      initializer: [],
      input: [io('query', FLOAT, ['B', 'S', HQ * D]), io('key', FLOAT, ['B', 'S', HKV * D]), io('value', FLOAT, ['B', 'S', HKV * D]), io('seqlens_k', INT32, ['B']), io('total_sequence_length', INT32, [])],
      output: [io('output', FLOAT, ['B', 'S', HQ * D]), io('present_key', FLOAT, ['B', HKV, 'T', D]), io('present_value', FLOAT, ['B', HKV, 'T', D])],
      valueInfo: [],
    },
  };
  return encodeModel(model);
}

async function measure(rows: number, promptTokens: number): Promise<Record<string, number>> {
  const session = await InferenceSession.create(gqaModel(), { intraOpNumThreads: 1, executionProviders: ['cpu'] });
  const fill = (n: number): Float32Array => {
    const a = new Float32Array(n);
    for (let i = 0; i < n; i++) a[i] = Math.sin(i) * 0.5;
    return a;
  };
  const feeds = {
    query: new Tensor('float32', fill(rows * promptTokens * HQ * D), [rows, promptTokens, HQ * D]),
    key: new Tensor('float32', fill(rows * promptTokens * HKV * D), [rows, promptTokens, HKV * D]),
    value: new Tensor('float32', fill(rows * promptTokens * HKV * D), [rows, promptTokens, HKV * D]),
    seqlens_k: new Tensor('int32', Int32Array.from({ length: rows }, () => promptTokens - 1), [rows]),
    total_sequence_length: new Tensor('int32', Int32Array.from([promptTokens]), []),
  };
  // Growth of the peak over what is resident just before the run (feeds included): VmRSS, not the
  // lifetime peak, which may hold garbage of building the feeds.
  const before = Number(/VmRSS:\s+(\d+)/.exec(readFileSync('/proc/self/status', 'utf8'))?.[1] ?? 0) * 1024;
  const out = await session.run(feeds);
  const after = process.resourceUsage().maxRSS * 1024;
  const outputBytes = Object.values(out).reduce((s, t) => s + (t.data as Float32Array).byteLength, 0);
  await session.release();
  return { rows, promptTokens, peakRssGrowthBytes: after - before, outputBytes, probsBufferBytes: rows * HQ * promptTokens * promptTokens * 4 };
}

const ROWS = 8;
const child = childPayload() as { rows: number; promptTokens: number } | undefined;
if (child !== undefined) {
  replyToParent(await measure(child.rows, child.promptTokens));
  process.exit(0);
}

const bench = startBench('gqa-cpu');
const promptLengths = (process.env['BENCH_PROMPT_TOKENS'] ?? '512,1024,2048').split(',').map(Number);
const results = promptLengths.map((promptTokens) => runChild(fileURLToPath(import.meta.url), { rows: ROWS, promptTokens }) as Record<string, number>);
const mb = (bytes: number | undefined): string => `${Math.round((bytes ?? 0) / 1e6)} MB`;
const body = [
  `One prompt-phase \`GroupQueryAttention\` node (com.microsoft) at Qwen3-0.6B's heads (${HQ} query / ${HKV} key-value heads × ${D}), ${ROWS} rows, ORT CPU provider, one thread; one child process per prompt length.`,
  '',
  '| prompt S | peak RSS growth | outputs | full (B, Hq, S, S) buffer | growth − outputs |',
  '| ---: | ---: | ---: | ---: | ---: |',
  ...results.map((r) => `| ${r['promptTokens']} | ${mb(r['peakRssGrowthBytes'])} | ${mb(r['outputBytes'])} | ${mb(r['probsBufferBytes'])} | ${mb((r['peakRssGrowthBytes'] ?? 0) - (r['outputBytes'] ?? 0))} |`),
  '',
  '- *Peak RSS growth*: the process\'s lifetime peak after the run minus its resident size just before it (feeds built).',
];
bench.write({ title: 'ONNX Runtime CPU GroupQueryAttention: memory of a prompt pass', body, data: { rows: ROWS, heads: { query: HQ, keyValue: HKV, dim: D }, results } });
process.stdout.write(`${body.join('\n')}\n`);
