import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { encodeAdapter, initLoraWeights, parseLoraConfig, parseModelConfig, saveAdapterDir } from '@sqlenv/model';
import { TINY_BYTE_MODEL_CONFIG } from '@sqlenv/model/testing';
import { checkAdapterPublished, checkAdapterShareWritable, publishAdapterVersion, publishStartAdapter, sharedAdapterDir } from './adapter-share.ts';

const root = mkdtempSync(join(tmpdir(), 'sqlenv-share-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const config = parseModelConfig(TINY_BYTE_MODEL_CONFIG);
const lora = parseLoraConfig({ rank: 2, alpha: 4 });
const blob = encodeAdapter(config, { lora, weights: initLoraWeights(config, lora, { seed: 1, bStd: 0.1 }) });

describe('the adapter share', () => {
  it('publishes a version as <run>/v<N>/ in PEFT layout, with nothing left beside it', () => {
    const share = join(root, 'a');
    const dir = publishAdapterVersion(share, 'run', 4, blob);
    expect(dir).toBe(sharedAdapterDir(share, 'run', 4));
    expect(readdirSync(join(share, 'run'))).toEqual(['v4']);
    expect(readdirSync(dir as string).sort()).toEqual(['adapter_config.json', 'adapter_model.safetensors']);
    expect(readFileSync(join(dir as string, 'adapter_model.safetensors'))).toEqual(blob);
    expect(() => checkAdapterPublished(share, 'run', 4)).not.toThrow();
    expect(() => checkAdapterPublished(share, 'run', 5)).toThrow(/version 5 of run run is committed but its adapter is not in the share/);
  });

  it('writes nothing for a statistics-only blob', () => {
    const share = join(root, 'b');
    expect(publishAdapterVersion(share, 'run', 1, Buffer.from(JSON.stringify({ kind: 'stats', batches: [] })))).toBeNull();
  });

  it('publishes the starting adapter as v0, replacing an older copy whole', () => {
    const share = join(root, 'c');
    const start = join(root, 'start');
    saveAdapterDir(start, config, { lora, weights: initLoraWeights(config, lora, { seed: 2 }) });
    writeFileSync(join(start, 'README.md'), 'not copied');
    mkdirSync(sharedAdapterDir(share, 'run', 0), { recursive: true });
    writeFileSync(join(sharedAdapterDir(share, 'run', 0), 'stale'), '');
    const dir = publishStartAdapter(share, 'run', start);
    expect(readdirSync(dir).sort()).toEqual(['adapter_config.json', 'adapter_model.safetensors']);
  });

  it('refuses a share that cannot be written, naming the flag', () => {
    const file = join(root, 'file');
    writeFileSync(file, '');
    expect(() => checkAdapterShareWritable(join(file, 'share'))).toThrow(/adapter share .* \(--adapter-share, SQLENV_ADAPTER_SHARE\) is not writable/);
    expect(() => checkAdapterShareWritable(join(root, 'fresh', 'share'))).not.toThrow();
    expect(readdirSync(join(root, 'fresh', 'share'))).toEqual([]);
  });
});
