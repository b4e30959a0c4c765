/**
 * Runs the requests of one served model at a time on an engine that holds one adapter. A request
 * of the active model is admitted at once unless a request of another model is waiting (then it
 * queues behind it, so the active model drains and the waiting one gets its turn); when the active
 * model's last request leaves, the oldest waiting request's model becomes active (`activate`, the
 * adapter switch), and every waiting request of that model is admitted together. No model waits for
 * more than one drain of each model queued before it.
 *
 * Pure scheduling: what activation means is the `activate` callback's business.
 */
export class ModelGate {
  readonly #activate: (model: string) => Promise<void>;
  /** The model the engine holds (`activate`d last; null: none to keep, see `forget`); requests of other models wait. */
  #active: string | null;
  #running = 0;
  #switching = false;
  readonly #waiting: { model: string; admit: () => void; fail: (error: unknown) => void }[] = [];

  constructor(initialModel: string, activate: (model: string) => Promise<void>) {
    this.#active = initialModel;
    this.#activate = activate;
  }

  get active(): string | null {
    return this.#active;
  }

  /**
   * The engine's copy of `model` is stale (the name was unloaded, and may be loaded again with other
   * weights): its next request activates it afresh. Requests already admitted finish as they are.
   */
  forget(model: string): void {
    if (this.#active === model) this.#active = null;
  }

  /** Requests admitted and not yet released. */
  get running(): number {
    return this.#running;
  }

  /** Requests queued behind another model. */
  get waiting(): number {
    return this.#waiting.length;
  }

  /** Resolves once a request of `model` may run; pair with `release()`. Rejects when activating the model failed. */
  acquire(model: string): Promise<void> {
    if (model === this.#active && !this.#switching && this.#waiting.length === 0) {
      this.#running++;
      return Promise.resolve();
    }
    return new Promise((admit, fail) => {
      this.#waiting.push({ model, admit, fail });
      this.#next();
    });
  }

  /** A request admitted by `acquire` finished. */
  release(): void {
    if (this.#running <= 0) throw new Error('ModelGate.release without a matching acquire');
    this.#running--;
    this.#next();
  }

  #next(): void {
    if (this.#running > 0 || this.#switching) return;
    const first = this.#waiting[0];
    if (first === undefined) return;
    if (first.model === this.#active) {
      this.#admitWaiting(first.model);
      return;
    }
    this.#switching = true;
    const model = first.model;
    this.#activate(model).then(
      () => {
        this.#active = model;
        this.#switching = false;
        this.#admitWaiting(model);
      },
      (error: unknown) => {
        this.#switching = false;
        for (const w of this.#take(model)) w.fail(error);
        this.#next();
      },
    );
  }

  #admitWaiting(model: string): void {
    for (const w of this.#take(model)) {
      this.#running++;
      w.admit();
    }
  }

  #take(model: string): { admit: () => void; fail: (error: unknown) => void }[] {
    const taken = this.#waiting.filter((w) => w.model === model);
    const rest = this.#waiting.filter((w) => w.model !== model);
    this.#waiting.length = 0;
    this.#waiting.push(...rest);
    return taken;
  }
}
