import { createSession, tensor, type GraphSession, type SessionConfig, type TensorData } from '@sqlenv/onnx-graph';
import { AppError, ErrorCode } from '@sqlenv/shared';
import type { ModelConfig } from '../io/config.ts';
import { leftPad, loraFeeds } from './batch.ts';
import { buildLogitsGraph, buildScoringGraph, IO, type ForwardGraphOptions, type ScoringGraphOptions } from '../graphs/forward-graphs.ts';
import { loraTensorSpecs, zeroLoraWeights, type LoraConfig, type LoraWeights } from '../graphs/lora.ts';
import type { ModelWeights } from '../io/weights.ts';

export interface ScorerOptions extends ScoringGraphOptions {
  session?: SessionConfig;
}

/** A model graph in one direct-mode session, with the LoRA configuration it was built with. */
abstract class DirectModelSession {
  readonly config: ModelConfig;
  readonly lora: LoraConfig | undefined;
  protected readonly session: GraphSession;

  protected constructor(config: ModelConfig, lora: LoraConfig | undefined, session: GraphSession) {
    this.config = config;
    this.lora = lora;
    this.session = session;
  }

  /** The LoRA inputs' feeds: `weights`, or a zero adapter (the base model) without them. */
  protected adapterFeeds(weights: LoraWeights | undefined): Record<string, TensorData> {
    if (this.lora === undefined) {
      if (weights !== undefined) throw new AppError(ErrorCode.VALIDATION, 'this graph was built without LoRA inputs');
      return {};
    }
    return loraFeeds(loraTensorSpecs(this.config, this.lora), weights ?? zeroLoraWeights(this.config, this.lora));
  }

  async close(): Promise<void> {
    await this.session.close();
  }
}

/**
 * Teacher-forced per-token log-probabilities of whole sequences (the
 * trainer's π_θ, and π_ref with a zero adapter), from the scoring graph.
 */
export class Scorer extends DirectModelSession {
  static async create(config: ModelConfig, weights: ModelWeights, options: ScorerOptions = {}): Promise<Scorer> {
    const { session, ...graphOptions } = options;
    const { graph } = buildScoringGraph(config, weights, graphOptions);
    return new Scorer(config, options.lora, await createSession(graph.toModel(), { mode: 'direct', ...session }));
  }

  /**
   * logprobs[i][t] = log p(seq_i[t] | seq_i[<t]) at `temperature` (default 1),
   * for t ≥ 1; entry 0 is 0. Sequences are left-padded into one batch.
   */
  async score(sequences: readonly (readonly number[])[], options: { temperature?: number; lora?: LoraWeights } = {}): Promise<number[][]> {
    const batch = leftPad(sequences, this.config.padTokenId);
    const feeds: Record<string, TensorData> = {
      [IO.inputIds]: batch.ids,
      [IO.attentionMask]: batch.mask,
      [IO.temperature]: tensor('float32', [], [options.temperature ?? 1]),
      ...this.adapterFeeds(options.lora),
    };
    const out = await this.session.run<'logprobs'>(feeds);
    const values = out.logprobs.data as Float32Array;
    return sequences.map((seq, b) => {
      const row = Array.from(values.subarray(b * batch.width + batch.padLengths[b]!, (b + 1) * batch.width));
      row[0] = 0; // the first real token has no prediction (its column held a padding position's)
      return row.slice(0, seq.length);
    });
  }
}

/** Full logits of every position (small models: tests and the `model logits` command). */
export class LogitsModel extends DirectModelSession {
  static async create(config: ModelConfig, weights: ModelWeights, options: ForwardGraphOptions & { session?: SessionConfig } = {}): Promise<LogitsModel> {
    const { session, ...graphOptions } = options;
    const { graph } = buildLogitsGraph(config, weights, graphOptions);
    return new LogitsModel(config, options.lora, await createSession(graph.toModel(), { mode: 'direct', ...session }));
  }

  /** Logits (T, V) per sequence, row-major, for the real (unpadded) positions. */
  async logits(sequences: readonly (readonly number[])[], options: { lora?: LoraWeights } = {}): Promise<Float32Array[]> {
    const batch = leftPad(sequences, this.config.padTokenId);
    const out = await this.session.run<'logits'>({
      [IO.inputIds]: batch.ids,
      [IO.attentionMask]: batch.mask,
      ...this.adapterFeeds(options.lora),
    });
    const V = this.config.vocabSize;
    const values = out.logits.data as Float32Array;
    return sequences.map((_, b) => values.slice((b * batch.width + batch.padLengths[b]!) * V, (b + 1) * batch.width * V));
  }
}
