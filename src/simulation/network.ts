/**
 * The simulated network between agents and gateways: each agent's
 * `connect` opens a `SimStream` to the gateway its URL names, or fails as
 * a refused connection does when that gateway is down. Latency is drawn
 * from the seed; a fault can slow it for a while.
 */
import { Code, ConnectError } from "@connectrpc/connect";
import type { AgentStreamClient, AgentStreamConnection } from "../agent/client/index.js";
import { PushQueue } from "../async/push-queue.js";
import type { ControlMessage } from "../gen/llmgw/v1/agent_pb.js";
import type { Rng } from "../sim/rng.js";
import type { SimGateway } from "./gateway.js";
import type { Scheduler } from "./scheduler.js";
import { type Latency, SimStream } from "./stream.js";

export class SimNetwork implements Latency {
  /** Latency of one message: `baseMs` plus up to as much again, times `slowdown`. */
  baseMs = 2;
  slowdown = 1;
  readonly streams = new Map<string, SimStream>();

  constructor(
    private readonly scheduler: Scheduler,
    private readonly rng: Rng,
    private readonly gateways: ReadonlyMap<string, SimGateway>,
  ) {}

  draw(): number {
    return this.baseMs * (1 + this.rng()) * this.slowdown;
  }

  /** The URL an agent dials for gateway `id`. */
  static url(id: string): string {
    return `http://${id}.sim`;
  }

  /** The agent transport of node `nodeId` (NodeAgentOptions.connect). */
  connectFor(nodeId: string): (url: string) => AgentStreamConnection {
    return (url) => {
      const client: AgentStreamClient = {
        connect: (requests, { signal }) => this.#open(nodeId, url, requests, signal),
      };
      return { client, close() {} };
    };
  }

  #open(
    nodeId: string,
    url: string,
    requests: Parameters<AgentStreamClient["connect"]>[0],
    signal: AbortSignal,
  ): AsyncIterable<ControlMessage> {
    const gw = [...this.gateways.values()].find((g) => SimNetwork.url(g.id) === url);
    if (!gw?.serving) {
      // Connection refused, after a round trip.
      const q = new PushQueue<ControlMessage>();
      this.scheduler.after(2 * this.draw(), () =>
        q.fail(new ConnectError(`connect ECONNREFUSED ${url}`, Code.Unavailable)),
      );
      return q;
    }
    const stream = new SimStream(nodeId, gw.id, this.scheduler, this);
    this.streams.set(nodeId, stream);
    gw.accept(stream);
    void stream.pump(requests, signal);
    return stream.toAgent;
  }
}
