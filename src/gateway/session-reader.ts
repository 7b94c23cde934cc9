import { Code, ConnectError } from "@connectrpc/connect";
import { readInto, takeWaiting } from "../async/read-into.js";
import type { AgentMessage } from "../gen/llmgw/v1/agent_pb.js";
import type { Input } from "./session-core/index.js";

/**
 * Reads one agent stream for its session: each read is the session core's
 * next input (a message, the end of the stream, a failed read, or the read
 * deadline as a `timer` input), or undefined once the session stops
 * reading. It notes how recently and how regularly the agent speaks (the
 * duplicate check's liveness).
 *
 * Every read is settled here, by the read or by an interruption (the
 * deadline, the stop), through one promise per read and the reader's own
 * handlers, never a race of promises made per message: each read lives until
 * the agent's next message, seconds later, so anything made per read
 * outlives young-generation collections and becomes old garbage. One timer
 * per stream keeps the deadline, refreshed at every read.
 */
export class AgentReader {
  #timer: NodeJS.Timeout | undefined;
  #timerMs = 0;
  /** Settles the read in progress (undefined when none is). */
  #settleRead: ((input: Input | undefined) => void) | undefined;
  /** Reads of the iterator that were interrupted: their answers come to nobody. */
  #orphans = 0;
  /** When the last agent message came (monotonic ms), and the longest gap between two so far. */
  #lastMessageAt = performance.now();
  #messages = 0;
  #longestGapMs = 0;

  constructor(
    private readonly it: AsyncIterator<AgentMessage>,
    /** Aborted when the session stops reading. */
    private readonly stop: AbortSignal,
    /** The connection's signal: a read failing after it aborted is a disconnect. */
    private readonly connection: AbortSignal,
    private readonly draining: () => boolean,
  ) {
    stop.addEventListener("abort", () => this.#interrupt(undefined), { once: true });
  }

  get silentForMs(): number {
    return performance.now() - this.#lastMessageAt;
  }

  /** Longest gap between two agent messages; undefined before the second. */
  get longestGapMs(): number | undefined {
    return this.#messages >= 2 ? this.#longestGapMs : undefined;
  }

  /**
   * The agent's next message if the transport holds one already: under load
   * they come many to a read, and a promise per message was a large share of
   * the reader's cost. The deadline's timer is not touched: if it passes
   * while no read waits, nothing happens, and the next `read` re-arms it.
   */
  takeWaiting(): Input | undefined {
    if (this.stop.aborted) return undefined;
    const m = takeWaiting(this.it);
    return m === undefined ? undefined : this.#heard(m);
  }

  /** The next input, waiting at most `timeoutMs` for it. */
  read(timeoutMs: number): Promise<Input | undefined> {
    if (this.stop.aborted) return Promise.resolve(undefined);
    if (this.#timer && this.#timerMs === timeoutMs) {
      // Also re-arms a timer that fired while no read was in progress.
      this.#timer.refresh();
    } else {
      clearTimeout(this.#timer);
      this.#timerMs = timeoutMs;
      this.#timer = setTimeout(this.#timedOut, timeoutMs);
      this.#timer.unref();
    }
    return new Promise<Input | undefined>((resolve) => {
      this.#settleRead = resolve;
      readInto(this.it, this.#onRead, this.#onReadFailed);
    });
  }

  /** No more reads: the deadline's timer stops. */
  dispose(): void {
    clearTimeout(this.#timer);
  }

  readonly #timedOut = (): void => this.#interrupt({ kind: "timer", timer: "read-deadline" });

  readonly #onRead = (r: IteratorResult<AgentMessage>): void => {
    if (this.#orphaned()) return;
    this.#settle(r.done ? { kind: "stream-ended" } : this.#heard(r.value));
  };

  readonly #onReadFailed = (err: unknown): void => {
    if (this.#orphaned()) return;
    const ce = agentFault(err);
    this.#settle({
      kind: "stream-failed",
      code: ce.code,
      detail: ce.rawMessage,
      aborted: this.connection.aborted,
    });
  };

  /** The read in progress, if any, ends with `input` instead of its message. */
  #interrupt(input: Input | undefined): void {
    if (!this.#settleRead) return;
    this.#orphans++;
    this.#settle(input);
  }

  /** An answer of the iterator to a read that was interrupted. */
  #orphaned(): boolean {
    if (this.#orphans === 0) return false;
    this.#orphans--;
    return true;
  }

  #settle(input: Input | undefined): void {
    const resolve = this.#settleRead;
    this.#settleRead = undefined;
    resolve?.(input);
  }

  #heard(message: AgentMessage): Input {
    const now = performance.now();
    if (this.#messages > 0) this.#longestGapMs = Math.max(this.#longestGapMs, now - this.#lastMessageAt);
    this.#lastMessageAt = now;
    this.#messages++;
    return { kind: "message", message, draining: this.draining(), at: now };
  }
}

/**
 * Bytes the agent sent that do not decode are its fault: InvalidArgument,
 * not the Internal the protocol layer reports them as. Connect marks these
 * with no error class, code or cause of their own (its serializer throws a
 * plain Internal "parse binary: …", its envelope reader "… envelope …"), so
 * its text is the only mark there is; every other failure keeps its code.
 */
function agentFault(err: unknown): ConnectError {
  const ce = ConnectError.from(err);
  if (ce.code === Code.Internal && /^parse binary|envelope/.test(ce.rawMessage)) {
    return new ConnectError(
      `undecodable message from the agent: ${ce.rawMessage}`,
      Code.InvalidArgument,
      undefined,
      undefined,
      ce,
    );
  }
  return ce;
}
