/**
 * How much memory does ONNX Runtime's CPU GroupQueryAttention (com.microsoft) take for a prompt's
 * attention probabilities? One prompt-phase GQA node at Qwen3-0.6B's head shapes (16 query heads, 8 key/value
 * heads, head dim 128), run once per prompt length in a fresh process; prints the growth of the
 * process's peak RSS over the run beside the outputs and a full (B, Hq, S, S) float32 buffer.
 * Figures in docs/inference.md ("## Attention").
 *
 *   node --import tsx bench/gqa-cpu-probe.ts [ROWS] [PROMPT_TOKENS]
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { InferenceSession, Tensor } from 'onnxruntime-node';
import { encodeModel, type ModelProto, type ValueInfoProto } from '@sqlenv/onnx-graph';

const [HQ, HKV, D] = [16, 8, 128];
const FLOAT = 1;
const INT32 = 6;

function gqaModel(): Uint8Array {
  const io = (name: string, elemType: number, shape: (number | string)[]): ValueInfoProto => ({ name, elemType, shape });
  const model: ModelProto = {
    irVersion: 8,
    producerName: 'gqa-cpu-probe',
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

const [rowsArg, promptArg] = process.argv.slice(2);
if (rowsArg !== undefined && promptArg !== undefined) {
  process.stdout.write(`${JSON.stringify(await measure(Number(rowsArg), Number(promptArg)))}\n`);
} else {
  const self = fileURLToPath(import.meta.url);
  for (const [rows, promptTokens] of [
    [8, 512],
    [8, 1024],
    [8, 2048],
  ] as const) {
    process.stdout.write(execFileSync(process.execPath, ['--import', 'tsx', self, String(rows), String(promptTokens)], { encoding: 'utf8' }));
  }
}
