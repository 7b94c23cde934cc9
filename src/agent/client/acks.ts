import type { AgentMessage } from "../../gen/llmgw/v1/agent_pb.js";

/** Kinds of agent message the gateway acknowledges once stored (heartbeats it does not). */
const ACKED_KINDS: ReadonlySet<AgentMessage["msg"]["case"]> = new Set(["register", "shard", "result"]);

/**
 * An agent's side of the acks of one stream: which of its messages are
 * acknowledged. Messages are numbered by their position in the stream (the
 * Register is 1, every message counts, heartbeats too), as the gateway's
 * `Ack.message_id` numbers them. With cumulative acks (the registration's
 * `cumulative_acks`), the ack of message n stands for every earlier message
 * the gateway acknowledges; otherwise it stands for n alone.
 */
export class AckTracker {
  #sent = 0;
  /** Positions of acknowledged kinds sent and not yet acknowledged, oldest first from `#head`. */
  readonly #waiting: number[] = [];
  #head = 0;

  constructor(readonly cumulative: boolean) {}

  /** Messages sent so far. */
  get sent(): number {
    return this.#sent;
  }

  /** Records a message as sent on the stream; returns its position. */
  record(kind: AgentMessage["msg"]["case"]): number {
    const n = ++this.#sent;
    if (n > 1 && ACKED_KINDS.has(kind)) this.#waiting.push(n);
    return n;
  }

  /**
   * The positions an ack stands for that no earlier ack did, in order
   * ("register" is the registration's ack: position 1).
   */
  acked(messageId: string): number[] {
    if (messageId === "register") return [1];
    const n = Number(messageId);
    if (!this.cumulative) {
      const i = this.#waiting.indexOf(n, this.#head);
      if (i < 0) return [];
      this.#waiting.splice(i, 1);
      return [n];
    }
    const out: number[] = [];
    while (this.#head < this.#waiting.length && (this.#waiting[this.#head] as number) <= n) {
      out.push(this.#waiting[this.#head++] as number);
    }
    if (this.#head > 1024) {
      this.#waiting.splice(0, this.#head);
      this.#head = 0;
    }
    return out;
  }
}
