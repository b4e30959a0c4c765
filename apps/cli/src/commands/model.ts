import { z } from 'zod';
import { silentLogger } from '@sqlenv/shared';
import { intFlag, parseFlags, positiveIntFlag } from '../flags.ts';
import { UsageError } from '../cli-error.ts';
import type { CommandIo } from '../io.ts';
import { ExecutionFlags, executionFlagOptions, startExecution } from '../execution-flags.ts';

const numberFlag = z.coerce.number().finite();

/**
 * `sqlenv model init|logits|generate`: random checkpoints, final-position
 * logits for external parity checks, and a continuation of a prompt. The model
 * package is imported lazily (it loads ONNX Runtime).
 */
export async function modelCommand(argv: string[], io: CommandIo): Promise<number> {
  const [sub, ...rest] = argv;
  const model = await import('@sqlenv/model');
  switch (sub) {
    case 'init': {
      const { flags } = parseFlags(
        rest,
        { config: { type: 'string' }, out: { type: 'string' }, seed: { type: 'string' }, dtype: { type: 'string' }, tokenizer: { type: 'string' }, force: { type: 'boolean' } },
        z.object({
          config: z.string().min(1),
          out: z.string().min(1),
          seed: intFlag.optional(),
          dtype: z.enum(['F32', 'F16', 'BF16']).optional(),
          tokenizer: z.string().min(1).optional(),
          /** Replace a non-empty --out directory whole. */
          force: z.boolean().default(false),
        }),
        { command: 'model init' },
      );
      const result = await model.modelInit({
        force: flags.force,
        config: flags.config,
        out: flags.out,
        ...(flags.tokenizer === undefined ? {} : { tokenizer: flags.tokenizer }),
        ...(flags.seed === undefined ? {} : { seed: flags.seed }),
        ...(flags.dtype === undefined ? {} : { dtype: flags.dtype }),
      });
      io.stdout.write(`${result.summary}\n`);
      return 0;
    }
    case 'tokenizer': {
      const { flags } = parseFlags(
        rest,
        { data: { type: 'string' }, out: { type: 'string' }, 'vocab-size': { type: 'string' }, 'split-words': { type: 'string' }, model: { type: 'string' } },
        z.object({
          data: z.string().min(1),
          out: z.string().min(1),
          'vocab-size': positiveIntFlag.default(1024),
          'split-words': z.enum(['true', 'false', 'isolated']).default('true'),
          model: z.string().min(1).optional(),
        }),
        { command: 'model tokenizer' },
      );
      const decoder = flags.model === undefined ? undefined : await model.tokenizerFor(flags.model, model.readModelConfig(flags.model));
      const result = model.modelTokenizer({
        data: flags.data,
        out: flags.out,
        vocabSize: flags['vocab-size'],
        splitWords: flags['split-words'] === 'isolated' ? 'isolated' : flags['split-words'] === 'true',
        ...(decoder === undefined ? {} : { decoder }),
      });
      io.stdout.write(`${result.summary}\n`);
      return 0;
    }
    case 'logits': {
      const { flags } = parseFlags(
        rest,
        { model: { type: 'string' }, tokens: { type: 'string' }, adapter: { type: 'string' }, json: { type: 'boolean' }, ...executionFlagOptions },
        z.object({ model: z.string().min(1), tokens: z.string().min(1), adapter: z.string().min(1).optional(), json: z.boolean().default(false) }).extend(ExecutionFlags.shape),
        { command: 'model logits', env: io.env ?? {} },
      );
      const execution = await startExecution(flags, io.env ?? {}, io.logger ?? silentLogger, true);
      const result = await model.modelLogits({
        model: flags.model,
        tokens: flags.tokens,
        json: flags.json,
        ...(flags.adapter === undefined ? {} : { adapter: flags.adapter }),
        session: { ...execution, logger: (io.logger ?? silentLogger).child({ role: 'logits' }) },
      });
      io.stdout.write(`${result.output}\n`);
      return 0;
    }
    case 'generate': {
      const { flags } = parseFlags(
        rest,
        {
          model: { type: 'string' },
          prompt: { type: 'string' },
          adapter: { type: 'string' },
          'max-new-tokens': { type: 'string' },
          temperature: { type: 'string' },
          'top-p': { type: 'string' },
          'top-k': { type: 'string' },
          seed: { type: 'string' },
          raw: { type: 'boolean' },
          json: { type: 'boolean' },
          ...executionFlagOptions,
        },
        z.object({
          model: z.string().min(1),
          prompt: z.string(),
          adapter: z.string().min(1).optional(),
          'max-new-tokens': positiveIntFlag.default(64),
          temperature: numberFlag.nonnegative().default(0.7),
          'top-p': numberFlag.gt(0).max(1).default(1),
          'top-k': intFlag.default(0),
          seed: intFlag.default(0),
          raw: z.boolean().default(false),
          json: z.boolean().default(false),
        }).extend(ExecutionFlags.shape),
        { command: 'model generate', env: io.env ?? {} },
      );
      const execution = await startExecution(flags, io.env ?? {}, io.logger ?? silentLogger, true);
      const result = await model.modelGenerate({
        model: flags.model,
        prompt: flags.prompt,
        ...(flags.adapter === undefined ? {} : { adapter: flags.adapter }),
        maxNewTokens: flags['max-new-tokens'],
        temperature: flags.temperature,
        topP: flags['top-p'],
        topK: flags['top-k'],
        seed: flags.seed,
        raw: flags.raw,
        session: { ...execution, logger: (io.logger ?? silentLogger).child({ role: 'generate' }) },
      });
      io.stdout.write(flags.json ? `${JSON.stringify(result)}\n` : `${result.text}\n`);
      return 0;
    }
    default:
      throw new UsageError(`expected init, tokenizer, logits or generate, got '${sub ?? ''}'`);
  }
}
