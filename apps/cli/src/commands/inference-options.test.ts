import { describe, expect, it } from 'vitest';
import { silentLogger } from '@sqlenv/shared';
import { parseFlags } from '../flags.ts';
import { UsageError } from '../cli-error.ts';
import { adapterShareOptionSpecs, AdapterShareOptionsSchema, inferenceOptionSpecs, InferenceOptionsSchema, startRemoteInference } from './inference-options.ts';

const schema = InferenceOptionsSchema.extend(AdapterShareOptionsSchema.shape);
const parse = (argv: string[], env: Record<string, string> = {}) => parseFlags(argv, { ...inferenceOptionSpecs, ...adapterShareOptionSpecs }, schema, { env }).flags;
const use = { training: false, logger: silentLogger };

describe('remote inference options', () => {
  it('reads the URL, key and share from their environment variables', () => {
    expect(parse([], { SQLENV_INFERENCE_URL: 'http://a:8000', SQLENV_INFERENCE_API_KEY: 'k', SQLENV_ADAPTER_SHARE: '/s' })).toEqual({ inferenceUrl: 'http://a:8000', inferenceApiKey: 'k', adapterShare: '/s' });
    expect(parse(['--inference-concurrency', '8', '--inference-model', 'm', '--adapter-share-as', '/x'])).toEqual({ inferenceConcurrency: 8, inferenceModel: 'm', adapterShareAs: '/x' });
  });

  it('samples in process without --inference-url, and refuses its companions alone', async () => {
    expect(await startRemoteInference({ adapterShare: '/s', inferenceApiKey: 'k' }, use)).toBeUndefined();
    await expect(startRemoteInference({ inferenceModel: 'm', adapterShareAs: '/x' }, use)).rejects.toThrow(/--inference-model, --adapter-share-as without --inference-url/);
  });

  it.each([
    [{ inferenceUrl: 'ftp://a' }, use, /each server is an http\(s\) base URL/],
    [{ inferenceUrl: 'http://a:1,not a url' }, use, /each server is an http\(s\) base URL/],
    [{ inferenceUrl: 'http://a:1' }, { ...use, sampling: { topP: 0.95, topK: 0 } }, /refused: top-p 0\.95 with a remote inference source/],
    [{ inferenceUrl: 'http://a:1' }, { ...use, sampling: { topP: 1, topK: 20 } }, /refused: top-k 20/],
    [{ inferenceUrl: 'http://a:1' }, { ...use, training: true }, /training with --inference-url needs --adapter-share DIR/],
  ])('refuses %j before asking any server (exit 2)', async (options, how, message) => {
    const error = await startRemoteInference(options, how).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(UsageError);
    expect((error as Error).message).toMatch(message);
  });
});
