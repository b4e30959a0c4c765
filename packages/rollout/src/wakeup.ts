/**
 * A level-triggered wake-up for polling loops: `wake()` before `wait()` is not
 * lost, and `wait(ms)` returns after at most `ms` anyway (the fallback poll
 * that covers a missed pub/sub notice).
 */
export class Wakeup {
  #pending = false;
  #resolve: (() => void) | undefined;

  wake(): void {
    if (this.#resolve) {
      const resolve = this.#resolve;
      this.#resolve = undefined;
      resolve();
    } else {
      this.#pending = true;
    }
  }

  wait(timeoutMs: number): Promise<void> {
    if (this.#pending) {
      this.#pending = false;
      return Promise.resolve();
    }
    return new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        this.#resolve = undefined;
        resolve();
      }, timeoutMs);
      this.#resolve = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }
}
