/**
 * Regenerates the kernel table (cuda-kernels.json) from the two published sources, for a new
 * onnxruntime-node version:
 *   node --import tsx scripts/extract-kernel-table.ts \
 *     <onnxruntime>/docs/OperatorKernels.md <onnx>/docs/Operators.md > packages/onnx-graph/src/kernel-coverage/cuda-kernels.json
 * (both at the release tags of the pinned versions; name them in `sources` by hand). Only facts are
 * kept: per op of the builder's op set, its ONNX version history and the CUDA provider's kernel
 * whose version range holds the op's version at opset 17, with its type constraints. Which
 * constraint each input and output uses is taken from the table's Parameters column.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { OP_GRADIENT, OPSET, opVersionAt, type KernelTable } from '@sqlenv/onnx-graph';

export interface KernelRow {
  op: string;
  since: number;
  until: number | null;
  inputs: string[];
  outputs: string[];
  types: Record<string, string[]>;
}

/** The rows of one provider's `ai.onnx` section of OperatorKernels.md, one per registered version range. */
export function parseOperatorKernels(markdown: string, provider: string): KernelRow[] {
  const start = markdown.indexOf(`## Operators implemented by ${provider}`);
  if (start < 0) throw new Error(`no section for ${provider}`);
  const section = markdown.slice(start).split(/\n## /)[0] ?? '';
  const rows: KernelRow[] = [];
  let domain = '';
  let op = '';
  let params = { inputs: [] as string[], outputs: [] as string[] };
  for (const line of section.split('\n')) {
    const domainMatch = /^\|\*\*Operator Domain:\*\* \*([^*]+)\*/.exec(line);
    if (domainMatch) domain = domainMatch[1] ?? '';
    if (domain !== 'ai.onnx' || !line.startsWith('|')) continue;
    const cells = line.split('|').slice(1, -1);
    if (cells.length !== 4 || !/\d/.test(cells[2] ?? '')) continue;
    if (cells[0] !== '') {
      op = cells[0] ?? '';
      // Parameters of the newest signature (the text before the first "or").
      const signature = (cells[1] ?? '').split('<br><br>or<br><br>')[0] ?? '';
      const kinds = [...signature.matchAll(/\*(in|out)\* [^:]+:\*\*([^*]+)\*\*/g)];
      params = { inputs: kinds.filter((m) => m[1] === 'in').map((m) => constraint(m[2] ?? '')), outputs: kinds.filter((m) => m[1] === 'out').map((m) => constraint(m[2] ?? '')) };
    }
    const range = (cells[2] ?? '').trim();
    const [since, until] = range.endsWith('+') ? [Number(range.slice(0, -1)), null] : range.startsWith('[') ? range.slice(1, -1).split(',').map((x) => Number(x.trim())) : [Number(range), Number(range)];
    const types: Record<string, string[]> = {};
    for (const part of (cells[3] ?? '').split('<br/>')) {
      const m = /\*\*([^*]+)\*\* = (.*)/.exec(part.trim());
      if (m) types[m[1] ?? ''] = [...(m[2] ?? '').matchAll(/(?<!seq\()tensor\(([a-z0-9]+)\)/g)].map((t) => t[1] ?? '');
    }
    rows.push({ op, since: since ?? 0, until: until ?? null, ...params, types });
  }
  return rows;
}

/** `tensor(int64)` → '=int64' (a fixed type); a constraint name stays as it is. */
function constraint(text: string): string {
  const fixed = /^tensor\(([a-z0-9]+)\)$/.exec(text);
  return fixed ? `=${fixed[1] ?? ''}` : text;
}

/** Version history per op from ONNX's Operators.md ("available since version N", "Other versions"). */
export function parseOnnxVersions(markdown: string, ops: readonly string[]): Record<string, number[]> {
  const out: Record<string, number[]> = {};
  for (const op of ops) {
    const at = markdown.indexOf(`<a name="${op}"></a>`);
    if (at < 0) continue;
    const body = markdown.slice(at, markdown.indexOf('\n### <a name=', at + 1));
    const since = /available since version (\d+)/.exec(body)?.[1];
    const others = /Other versions of this operator: (.*)/.exec(body)?.[1] ?? '';
    out[op] = [...new Set([Number(since), ...[...others.matchAll(/>(\d+)</g)].map((m) => Number(m[1]))])].sort((a, b) => a - b);
  }
  return out;
}

/** The table for the builder's op set: for each op, the kernel row holding its version at `opset`. */
export function buildKernelTable(rows: readonly KernelRow[], versions: Record<string, number[]>, sources: Record<string, string>, opset = OPSET): KernelTable {
  const ops: KernelTable['ops'] = {};
  for (const op of Object.keys(OP_GRADIENT)) {
    const history = versions[op] ?? [];
    const version = opVersionAt(history, opset);
    const row = rows.find((r) => r.op === op && version !== undefined && r.since <= version && (r.until === null || version <= r.until));
    ops[op] = row
      ? { versions: history, kernel: { since: row.since, until: row.until, inputs: row.inputs, outputs: row.outputs, types: row.types } }
      : { versions: history, kernel: null, ...(op === 'Constant' ? { loadTime: 'ONNX Runtime turns Constant nodes into initializers when it loads the graph' } : {}) };
  }
  return { description: 'CUDA execution provider kernels for the ops @sqlenv/onnx-graph emits. Read by kernel-coverage.ts; regenerate with scripts/extract-kernel-table.ts.', provider: 'CUDAExecutionProvider', domain: 'ai.onnx', opset, sources, ops };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [kernelsPath, operatorsPath] = process.argv.slice(2);
  if (!kernelsPath || !operatorsPath) throw new Error('usage: extract-kernel-table <OperatorKernels.md> <Operators.md>');
  const rows = parseOperatorKernels(readFileSync(kernelsPath, 'utf8'), 'CUDAExecutionProvider');
  const versions = parseOnnxVersions(readFileSync(operatorsPath, 'utf8'), Object.keys(OP_GRADIENT));
  process.stdout.write(`${JSON.stringify(buildKernelTable(rows, versions, { kernels: kernelsPath, versions: operatorsPath }), null, 1)}\n`);
}
