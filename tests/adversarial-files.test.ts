import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, describe, expect, it } from 'vitest';
import { main } from '@sqlenv/cli';
import {
  ADAPTER_CONFIG_FILE,
  ADAPTER_WEIGHTS_FILE,
  initLoraWeights,
  loadAdapterDir,
  loadChatFormat,
  modelInit,
  modelLogits,
  parseLoraConfig,
  presetConfig,
  readModelConfig,
  saveAdapterDir,
  toHfConfig,
  writeRandomCheckpoint,
  writeSafetensorsFile,
  expectedTensorSpecs,
} from '@sqlenv/model';
import { reportCommand, sftCommand } from '@sqlenv/cli';
import type { RunMetricsLine } from '@sqlenv/runs';
import { AppError } from '@sqlenv/shared';

// Hostile or careless files that arrive with a model or a run (issue 23): checkpoints, adapters,
// tokenizers and run directories. Every case must end in an error that names the file (and the
// tensor or field), or in the command working; never a crash, a silent wrong answer, or a
// half-written output.

const scratch = mkdtempSync(join(tmpdir(), 'sqlenv-adversarial-files-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function sink(): Writable & { text: () => string } {
  let text = '';
  const stream = new Writable({ write: (chunk: Buffer, _encoding, done) => ((text += chunk.toString('utf8')), done()) });
  return Object.assign(stream, { text: () => text });
}

function fresh(name: string): string {
  const dir = join(scratch, name);
  mkdirSync(dir, { recursive: true });
  return dir;
}

function metricsLine(version: number): RunMetricsLine {
  return {
    version,
    time: version * 1000,
    episodes: 8,
    reward_mean: Math.sin(version / 100),
    success_rate: (version % 10) / 10,
    format_error_rate: 0,
    mean_tokens: 100 + (version % 7),
    loss: 1 / version,
    kl: 0.01,
    clip_fraction: 0,
    grad_norm: 1,
    learning_rate: 1e-5,
    extra: {},
    non_finite: [],
    staleness_histogram: { '0': 6, [String(version % 3)]: 2 },
    episodes_per_s: 2,
    tokens_per_s: 200,
    // The five phases a trainer records: the phases chart then holds 5 × 30,000 points.
    phase_seconds: { rollout_wait: 0.1, read: 0.01, update: 0.5, commit: 0.02, other: 0.001 },
  };
}

describe('run directories', () => {
  it('sqlenv report on a metrics.jsonl of 30,000 versions writes the report (no stack overflow)', async () => {
    const runDir = fresh('long-run');
    const lines = Array.from({ length: 30_000 }, (_, i) => JSON.stringify(metricsLine(i + 1)));
    writeFileSync(join(runDir, 'metrics.jsonl'), `${lines.join('\n')}\n`);
    const stdout = sink();
    const stderr = sink();
    const code = await reportCommand([runDir], { stdout, stderr });
    expect(stderr.text()).toBe('');
    expect(code).toBe(0);
    expect(stdout.text()).toContain('(30000 versions, 0 evaluations)');
    const html = readFileSync(join(runDir, 'report.html'), 'utf8');
    expect(html).toContain('30000 policy versions recorded, last v30000');
    expect(readdirSync(runDir).sort()).toEqual(['metrics.jsonl', 'report.html']);
  }, 120_000);

  it('a report.html that is a directory: an error naming it, and no temporary file left', async () => {
    const runDir = fresh('report-is-dir');
    writeFileSync(join(runDir, 'metrics.jsonl'), `${JSON.stringify(metricsLine(1))}\n`);
    mkdirSync(join(runDir, 'report.html'));
    const stderr = sink();
    expect(await reportCommand([runDir], { stdout: sink(), stderr })).toBe(2);
    expect(stderr.text()).toContain(`cannot write ${join(runDir, 'report.html')}: it is a directory`);
    expect(readdirSync(runDir).sort()).toEqual(['metrics.jsonl', 'report.html']);
    expect(readdirSync(join(runDir, 'report.html'))).toEqual([]);
  });
});

/** The message of the AppError `run` throws or rejects with (fails the test when it does not). */
async function errorOf(run: () => unknown): Promise<string> {
  try {
    await run();
  } catch (error) {
    expect(error).toBeInstanceOf(AppError);
    return (error as AppError).message;
  }
  throw new Error('expected an AppError');
}

const tiny = presetConfig('tiny-qwen3');

/** A tiny random model directory (config.json + model.safetensors). */
function tinyModel(name: string): string {
  const dir = join(scratch, name);
  writeRandomCheckpoint(dir, tiny, { seed: 1, initStd: 0.1 });
  return dir;
}

function editConfig(dir: string, patch: Record<string, unknown>): void {
  const path = join(dir, 'config.json');
  writeFileSync(path, JSON.stringify({ ...(JSON.parse(readFileSync(path, 'utf8')) as object), ...patch }));
}

/** Rewrite a checkpoint with every tensor's values, one of them changed by `edit`. */
function rewriteTensor(dir: string, name: string, edit: (data: Float32Array) => void): void {
  const tensors = expectedTensorSpecs(tiny).map((spec) => {
    const data = new Float32Array(spec.shape.reduce((a, b) => a * b, 1)).fill(0.01);
    if (spec.name === name) edit(data);
    return { name: spec.name, shape: spec.shape, data };
  });
  writeSafetensorsFile(join(dir, 'model.safetensors'), tensors, 'F32');
}

describe('checkpoints', () => {
  it('config.json with 3,000,000 layers is refused by field, at once, not by an out-of-memory abort', async () => {
    const dir = tinyModel('layers-3m');
    editConfig(dir, { num_hidden_layers: 3_000_000 });
    expect(await errorOf(() => modelLogits({ model: dir, tokens: '1,2,3' }))).toMatch(/num_hidden_layers: .*<=1024/);
  });

  it('a config claiming more layers or another width than its weights is refused before any tensor is read', async () => {
    const more = tinyModel('layers-more');
    editConfig(more, { num_hidden_layers: 3 });
    expect(await errorOf(() => modelLogits({ model: more, tokens: '1' }))).toBe(`${join(more, 'config.json')}: num_hidden_layers 3, but the checkpoint in ${more} has no model.layers.2.input_layernorm.weight`);
    const wider = tinyModel('vocab-wider');
    editConfig(wider, { vocab_size: 1000 });
    expect(await errorOf(() => modelLogits({ model: wider, tokens: '1' }))).toContain('vocab_size 1000 × hidden_size 64 does not match model.embed_tokens.weight [272, 64]');
  });

  it('NaN or Inf in a weight is refused naming the tensor and the file', async () => {
    const dir = tinyModel('nan-weight');
    rewriteTensor(dir, 'model.layers.1.mlp.up_proj.weight', (data) => (data[17] = Number.NaN));
    expect(await errorOf(() => modelLogits({ model: dir, tokens: '1,2' }))).toBe(
      `${join(dir, 'model.safetensors')}: tensor model.layers.1.mlp.up_proj.weight holds a non-finite value NaN at index 17`,
    );
    rewriteTensor(dir, 'model.norm.weight', (data) => (data[0] = Number.NEGATIVE_INFINITY));
    expect(await errorOf(() => modelLogits({ model: dir, tokens: '1,2' }))).toContain('tensor model.norm.weight holds a non-finite value -Infinity');
  });

  it('overlapping data_offsets are refused, naming both tensors', async () => {
    const dir = fresh('overlap');
    const file = join(dir, 'model.safetensors');
    const header = JSON.stringify({ a: { dtype: 'F32', shape: [4], data_offsets: [0, 16] }, b: { dtype: 'F32', shape: [2], data_offsets: [8, 16] } });
    const length = Buffer.alloc(8);
    length.writeBigUInt64LE(BigInt(header.length));
    writeFileSync(file, Buffer.concat([length, Buffer.from(header), Buffer.alloc(16)]));
    writeFileSync(join(dir, 'config.json'), JSON.stringify(toHfConfig(tiny)));
    expect(await errorOf(() => modelLogits({ model: dir, tokens: '1' }))).toBe(`${file}: tensors a and b overlap in data_offsets (the safetensors format forbids shared bytes)`);
  });

  it('model init with absurd sizes refuses naming the field and leaves no directory', async () => {
    const parent = fresh('init-absurd');
    const hf = toHfConfig(tiny);
    for (const [patch, field] of [
      [{ num_hidden_layers: 1_000_000 }, 'num_hidden_layers'],
      [{ vocab_size: 1_000_000_000 }, 'vocab_size'],
    ] as const) {
      const out = join(parent, field);
      expect(await errorOf(() => modelInit({ config: JSON.stringify({ ...hf, ...patch }), out }))).toContain(field);
      expect(existsSync(out)).toBe(false);
    }
    // Within every per-field limit, but one tensor of 4,194,304 × 65,536 values cannot exist.
    const out = join(parent, 'embedding');
    const message = await errorOf(() => modelInit({ config: JSON.stringify({ ...hf, vocab_size: 4_194_304, hidden_size: 65_536, num_attention_heads: 4, head_dim: 16 }), out }));
    expect(message).toContain('vocab_size 4194304 × hidden_size 65536 (the embedding)');
    expect(readdirSync(parent)).toEqual([]);
  });

  it('model init --out on an existing model is refused without --force and replaces it whole with it', async () => {
    const out = tinyModel('init-existing');
    writeFileSync(join(out, 'tokenizer.json'), '{"old": true}');
    const before = readFileSync(join(out, 'model.safetensors'));
    expect(await errorOf(() => modelInit({ config: 'tiny-qwen2', out }))).toBe(`--out ${out} is not empty; pass --force to replace it, or choose another directory`);
    expect(readFileSync(join(out, 'model.safetensors')).equals(before)).toBe(true);
    await modelInit({ config: 'tiny-qwen2', out, force: true });
    // No file of the old model survives (the old tokenizer would not match the new config).
    expect(readdirSync(out).sort()).toEqual(['config.json', 'model.safetensors']);
    expect(readModelConfig(out).architecture).toBe('qwen2');
    expect(readdirSync(join(scratch)).filter((f) => f.endsWith('.tmp') || f.endsWith('.old'))).toEqual([]);
  });
});

describe('adapters', () => {
  const lora = parseLoraConfig({ rank: 4, alpha: 8, targets: ['q_proj', 'v_proj'] });

  function adapterDir(name: string): string {
    const dir = join(scratch, name);
    saveAdapterDir(dir, tiny, { lora, weights: initLoraWeights(tiny, lora, { seed: 1, bStd: 0.1 }) });
    return dir;
  }

  function patchAdapterConfig(dir: string, patch: Record<string, unknown>): void {
    const path = join(dir, ADAPTER_CONFIG_FILE);
    writeFileSync(path, JSON.stringify({ ...(JSON.parse(readFileSync(path, 'utf8')) as object), ...patch }));
  }

  it('NaN in an adapter tensor is refused naming the tensor and the file', async () => {
    const dir = adapterDir('nan-adapter');
    const weights = initLoraWeights(tiny, lora, { seed: 1, bStd: 0.1 });
    const name = 'base_model.model.model.layers.0.self_attn.v_proj.lora_A.weight';
    (weights.get(name) as Float32Array)[3] = Number.NaN;
    saveAdapterDir(dir, tiny, { lora, weights }, { force: true });
    expect(await errorOf(() => loadAdapterDir(dir, tiny))).toBe(`${join(dir, ADAPTER_WEIGHTS_FILE)}: tensor ${name} holds a non-finite value NaN at index 3`);
  });

  it('lora_alpha 1e308 is refused by file and field; a B that overflows once scaled by alpha/rank too', async () => {
    const dir = adapterDir('alpha-huge');
    patchAdapterConfig(dir, { lora_alpha: 1e308 });
    const message = await errorOf(() => loadAdapterDir(dir, tiny));
    expect(message).toContain(join(dir, ADAPTER_CONFIG_FILE));
    expect(message).toContain('alpha: the LoRA scale alpha / rank must be at most 1024');
    const scaled = adapterDir('b-overflows');
    const weights = initLoraWeights(tiny, parseLoraConfig({ rank: 4, alpha: 4000, targets: ['q_proj', 'v_proj'] }), { seed: 1 });
    const name = 'base_model.model.model.layers.1.self_attn.q_proj.lora_B.weight';
    (weights.get(name) as Float32Array)[0] = 1e36;
    saveAdapterDir(scaled, tiny, { lora: parseLoraConfig({ rank: 4, alpha: 4000, targets: ['q_proj', 'v_proj'] }), weights }, { force: true });
    expect(await errorOf(() => loadAdapterDir(scaled, tiny))).toContain(`tensor ${name} holds a non-finite value ${Math.fround(1e36)} (× scale 1000 overflows float32) at index 0`);
  });

  it('an empty target_modules, a rank above the projections and a weights file that is a directory name the path', async () => {
    const empty = adapterDir('targets-empty');
    patchAdapterConfig(empty, { target_modules: [] });
    expect(await errorOf(() => loadAdapterDir(empty, tiny))).toBe(`${join(empty, ADAPTER_CONFIG_FILE)}: target_modules is empty (expected some of q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj)`);
    const rank = adapterDir('rank-huge');
    patchAdapterConfig(rank, { r: 1_000_000, lora_alpha: 1_000_000 });
    expect(await errorOf(() => loadAdapterDir(rank, tiny))).toBe(
      `${join(rank, ADAPTER_WEIGHTS_FILE)}: LoRA rank 1000000 exceeds min(out, in) = 64 of q_proj [96, 64]: a rank above the smaller dimension adds parameters but no capacity`,
    );
    const dirWeights = adapterDir('weights-dir');
    rmSync(join(dirWeights, ADAPTER_WEIGHTS_FILE));
    mkdirSync(join(dirWeights, ADAPTER_WEIGHTS_FILE));
    expect(await errorOf(() => loadAdapterDir(dirWeights, tiny))).toBe(`${join(dirWeights, ADAPTER_WEIGHTS_FILE)} is not a regular file (a directory?)`);
  });
});

describe('tokenizers', () => {
  /** A model directory whose tokenizer.json is a small BPE with the given vocabulary and added tokens. */
  function withTokenizer(name: string, vocab: Record<string, number>, added: { id: number; content: string }[] = []): string {
    const dir = tinyModel(name);
    const tokenizer = {
      version: '1.0',
      added_tokens: added.map((t) => ({ ...t, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true })),
      normalizer: null,
      pre_tokenizer: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true },
      post_processor: null,
      decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
      model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null, fuse_unk: false, byte_fallback: false, vocab, merges: [] },
    };
    writeFileSync(join(dir, 'tokenizer.json'), JSON.stringify(tokenizer));
    return dir;
  }

  it('ids outside the vocabulary, duplicate or negative ids and an empty vocabulary are refused at load, naming the file', async () => {
    const outside = withTokenizer('tok-outside', { a: 0, b: 1 }, [{ id: 5000, content: '<|im_end|>' }]);
    expect(await errorOf(() => loadChatFormat(outside))).toBe(`${join(outside, 'tokenizer.json')}: token "<|im_end|>" has id 5000, outside the model's vocabulary of 272 ids (vocab_size)`);
    const duplicate = withTokenizer('tok-duplicate', { a: 0, b: 1, c: 1 });
    expect(await errorOf(() => loadChatFormat(duplicate))).toBe(`${join(duplicate, 'tokenizer.json')}: id 1 is given to two tokens, "b" and "c"`);
    const negative = withTokenizer('tok-negative', { a: 0, b: -3 });
    expect(await errorOf(() => loadChatFormat(negative))).toBe(`${join(negative, 'tokenizer.json')}: token "b" has id -3; ids are integers ≥ 0`);
    const empty = withTokenizer('tok-empty', {});
    expect(await errorOf(() => loadChatFormat(empty))).toBe(`${join(empty, 'tokenizer.json')}: model.vocab is empty: every text would encode to no tokens`);
  });
});

describe('outputs over inputs (sft, eval --save-eval)', () => {
  async function sft(args: string[]): Promise<{ code: number; stderr: string }> {
    const stderr = sink();
    const code = await sftCommand(args, { stdout: sink(), stderr });
    return { code, stderr: stderr.text() };
  }

  it('sft refuses --out equal to or inside --model even with --force, an existing adapter without it, and an unbounded --lora-rank, before training', async () => {
    const model = tinyModel('sft-model');
    const before = readFileSync(join(model, 'model.safetensors'));
    const data = join(scratch, 'sft-data.jsonl');
    writeFileSync(data, '');
    const same = await sft(['--model', model, '--data', data, '--steps', '1', '--full', '--out', model, '--force']);
    expect(same.code).toBe(2);
    expect(same.stderr).toContain(`--out ${model} is --model ${model}: an output never replaces an input`);
    const inside = await sft(['--model', model, '--data', data, '--steps', '1', '--out', join(model, 'adapter')]);
    expect(inside.stderr).toContain('is inside --model');
    expect(readFileSync(join(model, 'model.safetensors')).equals(before)).toBe(true);

    const existing = join(scratch, 'sft-existing-adapter');
    saveAdapterDir(existing, tiny, { lora: parseLoraConfig({ rank: 2 }), weights: initLoraWeights(tiny, parseLoraConfig({ rank: 2 })) });
    const over = await sft(['--model', model, '--data', data, '--steps', '1', '--out', existing]);
    expect(over.code).toBe(2);
    expect(over.stderr).toContain(`--out ${existing} is not empty; pass --force to replace it`);

    const rank = await sft(['--model', model, '--data', data, '--steps', '1', '--lora-rank', '1000000', '--out', join(scratch, 'sft-rank')]);
    expect(rank.code).toBe(2);
    expect(rank.stderr).toContain('--lora-rank 1000000: LoRA rank 1000000 exceeds min(out, in) = 64 of q_proj [96, 64]');
    expect(existsSync(join(scratch, 'sft-rank'))).toBe(false);
  });

  it('eval --save-eval onto an existing evaluation is refused before playing unless --force', async () => {
    const runDir = fresh('eval-overwrite');
    const cacheDir = join(scratch, 'eval-cache');
    const evalArgs = ['eval', '--episodes', '2', '--dataset', 'builtin', '--save-eval', runDir, '--eval-name', 'after'];
    // The CLI's io takes terminal streams; these sinks write like them.
    const io = (): { stdout: ReturnType<typeof sink>; stderr: ReturnType<typeof sink> } & Parameters<typeof main>[1] => ({ stdout: sink(), stderr: sink() }) as never;
    const previousCache = process.env['SQLENV_CACHE_DIR'];
    process.env['SQLENV_CACHE_DIR'] = cacheDir;
    try {
      const first = io();
      expect(await main(evalArgs, first)).toBe(0);
      const path = join(runDir, 'evals', 'after.json');
      const saved = readFileSync(path, 'utf8');
      const second = io();
      expect(await main(evalArgs, second)).toBe(2);
      expect(second.stderr.text()).toContain(`evaluation after: ${path} already exists; pass --force to replace it`);
      expect(second.stdout.text()).toBe('');
      expect(readFileSync(path, 'utf8')).toBe(saved);
      const forced = io();
      expect(await main([...evalArgs, '--seed', '9', '--force'], forced)).toBe(0);
      expect(readFileSync(path, 'utf8')).not.toBe(saved);
      expect(readdirSync(join(runDir, 'evals'))).toEqual(['after.json']);
    } finally {
      if (previousCache === undefined) delete process.env['SQLENV_CACHE_DIR'];
      else process.env['SQLENV_CACHE_DIR'] = previousCache;
    }
  }, 120_000);
});
