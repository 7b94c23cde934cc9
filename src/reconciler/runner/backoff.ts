/**
 * Capped exponential backoff for failed passes: base, 2×base, 4×base, ... up
 * to max, with up to 20% jitter taken off so that several reconcilers that
 * failed together do not retry together.
 */
export class Backoff {
  #failures = 0;

  constructor(
    readonly baseMs: number,
    readonly maxMs: number,
    private readonly random: () => number = Math.random,
  ) {}

  get failures(): number {
    return this.#failures;
  }

  /** Records one more failure and returns how long to wait before trying again. */
  fail(): number {
    const exp = Math.min(this.maxMs, this.baseMs * 2 ** Math.min(this.#failures, 30));
    this.#failures++;
    return Math.round(exp * (1 - 0.2 * this.random()));
  }

  reset(): void {
    this.#failures = 0;
  }
}
