import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { runProblems, trainCommandLine } from './train.ts';

describe('sqlenv train fails loudly', () => {
  const ev = (name: string, formatErrorRate: number) => ({ name, episodes_count: 10, format_error_rate: formatErrorRate });

  it('on NaN or infinite learner numbers', () => {
    expect(runProblems([3, 4], [])).toEqual(['the learner reported NaN or infinite numbers at version(s) 3, 4']);
  });

  it('when the policy collapses to format errors only, not when it never wrote a valid call', () => {
    expect(runProblems([], [ev('before', 0.2), ev('after', 1)])).toEqual(['the policy collapsed: format errors went from 20.0 % to 100 % of the steps']);
    expect(runProblems([], [ev('before', 1), ev('after', 1)])).toEqual([]);
    expect(runProblems([], [ev('before', 0.2), ev('after', 0.1)])).toEqual([]);
  });
});

describe('trainCommandLine', () => {
  it('spells the remote flags out but never the API key', () => {
    const line = trainCommandLine({ policy: 'model', inferenceUrl: 'http://a:8000,http://b:8000', inferenceApiKey: 'secret', adapterShare: '/share', adapterShareAs: '/adapters' });
    expect(line).toBe('sqlenv train --policy model --inference-url http://a:8000,http://b:8000 --adapter-share /share --adapter-share-as /adapters');
  });
});

describe('training runs bound their sizes with clear messages', () => {
  const capture = (): { io: { stdout: NodeJS.WritableStream; stderr: NodeJS.WritableStream }; text: () => string } => {
    let text = '';
    const stream = { write: (chunk: string) => ((text += chunk), true) } as unknown as NodeJS.WritableStream;
    return { io: { stdout: stream, stderr: stream }, text: () => text };
  };

  it('train and learn refuse --episodes beyond 1,000,000 and --eval-seeds beyond 10,000 before loading anything', async () => {
    const { main } = await import('../main.ts');
    for (const [args, message] of [
      [['train', '--episodes', '2000000'], '--episodes must be ≤ 1,000,000'],
      [['train', '--eval-seeds', '20000'], '--eval-seeds must be ≤ 10,000'],
      [['learn', '--episodes', '2000000'], '--episodes must be ≤ 1,000,000'],
      [['learn', '--eval-seeds', '20000'], '--eval-seeds must be ≤ 10,000'],
      [['coordinator', '--redis', 'redis://127.0.0.1:1', '--episodes', '2000000'], '--episodes must be ≤ 1,000,000'],
      // A learner micro-batch the memory limit cannot hold is refused at start, with the estimate.
      [['train', '--policy', 'model', '--model', fileURLToPath(new URL('../../../../models/sqlenv-tiny', import.meta.url)), '--learner', '{"microBatchTokens":100000000}'], 'the learner does not fit in'],
    ] as const) {
      const c = capture();
      expect(await main([...args], { ...c.io, env: {} }), c.text()).toBe(2);
      expect(c.text()).toContain(message);
    }
  });
});
