/**
 * A request body on its way upstream: forwarded as it arrives, with
 * back-pressure, and a copy kept until the first response byte (up to a
 * limit) so that a request that failed before it can be sent again to
 * another replica. Never the whole body waited for.
 */
import type { ClientRequest, IncomingMessage } from "node:http";

export class BodyRelay {
  #kept: Buffer[];
  #size: number;
  #ended: boolean;
  /** Every byte since the first is kept: the body can be sent again. */
  #replayable: boolean;
  #target: ClientRequest | undefined;

  constructor(
    private readonly req: IncomingMessage,
    first: { chunks: Buffer[]; size: number; ended: boolean },
    private readonly limits: { maxBodyBytes: number; retryBodyBytes: number },
    private readonly onTooLarge: () => void,
  ) {
    this.#kept = first.chunks;
    this.#size = first.size;
    this.#ended = first.ended;
    this.#replayable = true;
    req.on("data", (c: Buffer) => this.#data(c));
    req.on("end", () => {
      // Ended already when the bytes its Content-Length announced had all come.
      if (this.#ended) return;
      this.#ended = true;
      this.#target?.end();
    });
  }

  get replayable(): boolean {
    return this.#replayable;
  }

  /** Sends what came so far to `up` and the rest as it comes. */
  attach(up: ClientRequest): void {
    this.#target = up;
    const kept = this.#kept;
    if (!this.#replayable) this.#kept = [];
    if (this.#ended) {
      // The whole body is here: head and body leave in one write.
      for (let i = 0; i < kept.length - 1; i++) up.write(kept[i] as Buffer);
      up.end(kept.at(-1));
      this.req.resume();
      return;
    }
    for (const c of kept) up.write(c);
    this.req.resume();
  }

  /** The attempt in progress failed: nothing more goes to it. */
  detach(): void {
    this.#target = undefined;
    this.req.pause();
  }

  /** The first response byte came: no retry from now on, nothing more kept. */
  release(): void {
    this.#replayable = false;
    this.#kept = [];
  }

  #data(c: Buffer): void {
    this.#size += c.length;
    if (this.#size > this.limits.maxBodyBytes) {
      this.req.pause();
      this.onTooLarge();
      return;
    }
    if (this.#replayable) {
      if (this.#size <= this.limits.retryBodyBytes) this.#kept.push(c);
      else {
        this.#replayable = false;
        this.#kept = [];
      }
    }
    const t = this.#target;
    if (!t) {
      this.req.pause();
      return;
    }
    if (!t.write(c)) {
      this.req.pause();
      t.once("drain", () => {
        if (this.#target === t) this.req.resume();
      });
    }
  }
}
