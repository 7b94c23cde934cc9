import { Code } from "@connectrpc/connect";
import type { Logger } from "pino";
import type { GatewayMetrics } from "./metrics.js";
import type { Close, Note, SessionState } from "./session-core/index.js";

/**
 * What one session tells the gateway's log and metrics: the notes of its
 * core's steps, its close and its refusal. It decides nothing; its logger
 * names the node and the session once the Register is read.
 */
export class SessionReport {
  #logger: Logger;

  constructor(
    private readonly base: Logger,
    private readonly metrics: GatewayMetrics,
  ) {
    this.#logger = base;
  }

  get logger(): Logger {
    return this.#logger;
  }

  /** Engine output (`engine-log`) is not a report: the session relays it to its host. */
  note(n: Exclude<Note, { kind: "engine-log" }>, state: SessionState): void {
    switch (n.kind) {
      case "opened":
        this.#logger = this.base.child({ node: state.nodeId, session: state.sessionId });
        return;
      case "open":
        this.#logger.info({ gpus: n.gpus, identity: n.identity, seq: n.seq }, "session opened");
        return;
      case "ack-coalesced":
        this.metrics.ackCoalesced();
        return;
      case "unknown-gpus":
        this.#logger.warn(
          { gpus: n.gpus },
          "heartbeat.gpu_problems names GPUs the registration does not list; dropped",
        );
        return;
      case "unknown-message":
        this.#logger.debug({ seq: n.seq }, "message of an unknown kind ignored");
        return;
      case "usage-coalesced":
        this.metrics.usageCoalesced.inc();
        return;
      case "text-truncated":
        for (const field of n.fields) this.metrics.textTruncated.inc({ field });
        this.#logger.debug({ fields: n.fields }, "free text over its cap cut with a marker");
        return;
      case "problems-dropped":
        this.metrics.problemsCoalesced.inc(n.count);
        this.#logger.warn(
          { count: n.count },
          "heartbeat problems past the bound of one usage interval's event; not recorded",
        );
        return;
      default: {
        const never: never = n;
        throw new Error(`unknown note ${JSON.stringify(never)}`);
      }
    }
  }

  /** The core closed the session. */
  closing(close: Close): void {
    if (close.kind === "event-budget") {
      this.metrics.overBudget.inc();
      this.#logger.warn({ detail: close.detail }, "session over its event budget; closing it");
    } else if (close.kind === "byte-budget") {
      this.metrics.overByteBudget.inc();
      this.#logger.warn({ detail: close.detail }, "session over its byte budget; closing it");
    }
  }

  /** The stream never became a session. `reset`: the client reset its own stream. */
  refused(close: { code: Code; detail: string }, node: string, reset: boolean): void {
    this.metrics.rejected.inc({ code: Code[close.code] });
    // A client that reset its own stream is gone: a line per reset would let
    // a rapid-reset flood write the gateway's log at its pace (the metric counts them).
    this.#logger[reset ? "debug" : "info"](
      { code: Code[close.code], err: close.detail, node: node || undefined },
      "stream refused",
    );
  }
}
