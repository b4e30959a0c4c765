import type { LoraWeights } from '../graphs/lora.ts';

/** A requested adapter swap, waiting for the turns submitted before it to be admitted. */
interface Swap {
  epoch: number;
  weights: LoraWeights | null;
  version: number;
  done: () => void;
}

/** What the scheduler needs to know of a pending swap. */
export interface PendingSwap {
  /** Turns with a smaller epoch were submitted before it. */
  epoch: number;
  /** New tensors: the kept caches (computed under the old ones) are dropped when it applies. */
  newTensors: boolean;
}

/**
 * Adapter epochs: every swap request opens an epoch, every turn carries the epoch it was submitted
 * in, and a swap applies once no waiting turn of an earlier epoch is left. `generation` counts the
 * swaps that brought new tensors: rows of two generations never share a run, and a row whose
 * generation is not the current one parks nothing (its keys and values are the old adapter's).
 */
export class AdapterEpochs {
  readonly #swaps: Swap[] = [];
  #requested = 0;
  #applied = 0;
  #generation = 0;
  #lora: LoraWeights | undefined;
  #version = 0;

  /** The epoch a turn submitted now belongs to. */
  get requested(): number {
    return this.#requested;
  }

  /** The epoch of the adapter applied now. */
  get applied(): number {
    return this.#applied;
  }

  get generation(): number {
    return this.#generation;
  }

  get lora(): LoraWeights | undefined {
    return this.#lora;
  }

  get version(): number {
    return this.#version;
  }

  get pending(): PendingSwap[] {
    return this.#swaps.map((s) => ({ epoch: s.epoch, newTensors: s.weights !== null }));
  }

  /** Queue a swap; `done` is called when it applies. */
  request(weights: LoraWeights | null, version: number, done: () => void): void {
    this.#swaps.push({ epoch: ++this.#requested, weights, version, done });
  }

  /** Apply the oldest pending swap; whether it brought new tensors. */
  applyNext(): boolean {
    const swap = this.#swaps.shift();
    if (swap === undefined) return false;
    if (swap.weights !== null) {
      this.#lora = swap.weights;
      this.#generation++;
    }
    this.#version = swap.version;
    this.#applied = swap.epoch;
    swap.done();
    return swap.weights !== null;
  }
}
