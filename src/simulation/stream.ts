/**
 * One agent stream on the simulated network: an HTTP/2 stream between an
 * agent and a gateway. Each direction is ordered (as HTTP/2 keeps it) and
 * late by the network's latency; what is in flight when the stream is reset
 * is lost. The agent side is what `AgentConnection` iterates; the gateway
 * side is a `SimSession` (gateway.ts).
 */
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import type { AgentMessageInit } from "../agent/client/index.js";
import { PushQueue } from "../async/push-queue.js";
import { type AgentMessage, AgentMessageSchema, type ControlMessage } from "../gen/llmgw/v1/agent_pb.js";
import type { Scheduler } from "./scheduler.js";

/** The gateway's side of a stream: what the network hands it. */
export interface StreamReceiver {
  message(m: AgentMessage): void;
  /** The agent ended its side (its outbox ended). */
  ended(): void;
  /** The connection went (reset, aborted, or the agent's machine went). */
  disconnected(): void;
}

export interface Latency {
  /** One-way latency of a message, ms (drawn per message). */
  draw(): number;
}

export class SimStream {
  /** What the agent reads. */
  readonly toAgent = new PushQueue<ControlMessage>();
  #receiver: StreamReceiver | undefined;
  /** Last delivery time each way: a stream is ordered. */
  #lastToGateway = 0;
  #lastToAgent = 0;
  /** Reset: nothing more is delivered either way. */
  #reset = false;
  #agentDone = false;

  constructor(
    readonly nodeId: string,
    readonly gatewayId: string,
    private readonly scheduler: Scheduler,
    private readonly latency: Latency,
  ) {}

  get isReset(): boolean {
    return this.#reset;
  }

  attach(r: StreamReceiver): void {
    this.#receiver = r;
  }

  /** Reads the agent's outbox until it ends, delivering each message in order. */
  async pump(requests: AsyncIterable<AgentMessageInit>, signal: AbortSignal): Promise<void> {
    signal.addEventListener("abort", () => this.#agentAborted(), { once: true });
    try {
      for await (const init of requests) {
        if (this.#reset) return;
        const m = create(AgentMessageSchema, init);
        this.#toGateway(() => this.#receiver?.message(m));
      }
      if (!this.#reset) this.#toGateway(() => this.#receiver?.ended());
    } catch {
      // The outbox failed: the agent's side is gone.
      this.#agentAborted();
    }
  }

  /** The gateway writes `m` to the agent. */
  send(m: ControlMessage): void {
    this.#toAgent(() => this.toAgent.push(m));
  }

  /** The gateway ends the stream after what it wrote: OK (`code` undefined) or with `code`. */
  end(code: Code | undefined, detail: string): void {
    this.#toAgent(() => {
      if (code === undefined) this.toAgent.end();
      else this.toAgent.fail(new ConnectError(detail, code));
    });
  }

  /**
   * The connection breaks under both ends (a reset, the gateway's process
   * gone): what is in flight is lost; each side learns of it after the
   * network's latency (`gatewayLateMs` more for the gateway: a half-open
   * connection it notices late).
   */
  reset(detail: string, gatewayLateMs = 0): void {
    if (this.#reset) return;
    this.#reset = true;
    const s = this.scheduler;
    s.after(this.latency.draw(), () => this.toAgent.fail(new ConnectError(detail, Code.Unavailable)));
    s.after(this.latency.draw() + gatewayLateMs, () => this.#receiver?.disconnected());
  }

  #agentAborted(): void {
    if (this.#agentDone) return;
    this.#agentDone = true;
    this.toAgent.fail(new ConnectError("the operation was aborted", Code.Canceled));
    const wasReset = this.#reset;
    this.#reset = true;
    if (!wasReset) this.#toGateway(() => this.#receiver?.disconnected(), true);
  }

  /** Delivers to the gateway in order; `always`: even once reset (the news of the reset itself). */
  #toGateway(fn: () => void, always = false): void {
    const at = Math.max(this.#lastToGateway, this.scheduler.now + this.latency.draw());
    this.#lastToGateway = at;
    this.scheduler.after(at - this.scheduler.now, () => {
      if (always || !this.#reset) fn();
    });
  }

  #toAgent(fn: () => void): void {
    if (this.#reset) return;
    const at = Math.max(this.#lastToAgent, this.scheduler.now + this.latency.draw());
    this.#lastToAgent = at;
    this.scheduler.after(at - this.scheduler.now, () => {
      if (!this.#reset) fn();
    });
  }
}
