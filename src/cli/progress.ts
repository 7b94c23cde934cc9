/**
 * A progress line on stderr for long folds: events folded, rate, percent.
 * Shown only once a replay has run for a second, at most twice a second; on
 * a terminal it rewrites one line, elsewhere it prints a line each time.
 */
export class ProgressLine {
  readonly #started = Date.now();
  #lastShown = 0;
  #shown = false;

  constructor(
    private readonly out: NodeJS.WriteStream,
    private readonly label = "replay",
    private readonly verb = "folded",
  ) {}

  update(p: { folded: number; seq: number; fromSeq: number; targetSeq: number }): void {
    const now = Date.now();
    if (now - this.#started < 1000 || now - this.#lastShown < 500) return;
    this.#lastShown = now;
    const span = Math.max(1, p.targetSeq - p.fromSeq);
    const pct = Math.min(100, (100 * (p.seq - p.fromSeq)) / span);
    const rate = p.folded / Math.max(0.001, (now - this.#started) / 1000);
    const line = `${this.label}: ${p.folded} events ${this.verb}, ${Math.round(rate)}/s, ${pct.toFixed(1)}% (sequence ${p.seq} of ${p.targetSeq})`;
    if (this.out.isTTY) this.out.write(`\r${line}\x1b[K`);
    else this.out.write(`${line}\n`);
    this.#shown = true;
  }

  /** A message on its own line (ends the progress line first). */
  note(message: string): void {
    this.done();
    this.out.write(`llmgw: ${message}\n`);
  }

  done(): void {
    if (this.#shown && this.out.isTTY) this.out.write("\n");
    this.#shown = false;
  }
}
