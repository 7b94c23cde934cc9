/**
 * What an agent said that the control plane has not acknowledged yet, so it
 * can be said again on the next stream.
 *
 * A stream's acks name positions in that stream; a new stream numbers its
 * messages afresh, so an entry is keyed by its position in the stream it was
 * last sent on. Only kinds the gateway acknowledges are kept (shard status,
 * command results); heartbeats are not: the next heartbeat says more.
 * Re-sent in the order first said, except that a shard status superseded by a
 * later status of the same shard is dropped: the later one says where the
 * shard is now, and re-telling the path there would make the control plane
 * see the shard go back (RUNNING → STARTING → RUNNING) after a reconnect.
 */
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { AgentMessageSchema } from "../../gen/llmgw/v1/agent_pb.js";

export type AgentMessageInit = MessageInitShape<typeof AgentMessageSchema>;

interface Entry {
  /** Order first said, across streams. */
  order: number;
  msg: AgentMessageInit;
  /** Position on the stream it was last sent on; 0: not sent on the current stream. */
  position: number;
}

export class UnackedOutbox {
  #order = 0;
  readonly #entries = new Map<number, Entry>();
  /** Shard id → order of its latest status still waiting. */
  readonly #latestStatus = new Map<string, number>();
  readonly #byPosition = new Map<number, number>();

  /** Messages waiting for an ack. */
  get size(): number {
    return this.#entries.size;
  }

  /** Keeps `msg` until acknowledged; returns its order. Kinds that are never acknowledged are not kept. */
  keep(msg: AgentMessageInit): number | undefined {
    const kind = msg.msg?.case;
    if (kind !== "shard" && kind !== "result") return undefined;
    const order = ++this.#order;
    const shardId = statusShardId(msg);
    if (shardId !== undefined) {
      const older = this.#latestStatus.get(shardId);
      if (older !== undefined) this.#drop(older);
      this.#latestStatus.set(shardId, order);
    }
    this.#entries.set(order, { order, msg, position: 0 });
    return order;
  }

  /** Records that the message of `order` went out at `position` of the current stream. */
  sentAt(order: number, position: number): void {
    const e = this.#entries.get(order);
    if (!e) return;
    e.position = position;
    this.#byPosition.set(position, order);
  }

  /** The gateway acknowledged these positions of the current stream. */
  acked(positions: readonly number[]): void {
    for (const p of positions) {
      const order = this.#byPosition.get(p);
      if (order !== undefined) this.#drop(order);
    }
  }

  /**
   * A new stream: everything still waiting is to be sent again on it, in the
   * order first said. Positions of the old stream mean nothing any more.
   */
  pendingForNewStream(): Array<{ order: number; msg: AgentMessageInit }> {
    this.#byPosition.clear();
    const out = [...this.#entries.values()].sort((a, b) => a.order - b.order);
    for (const e of out) e.position = 0;
    return out.map((e) => ({ order: e.order, msg: e.msg }));
  }

  #drop(order: number): void {
    const e = this.#entries.get(order);
    if (!e) return;
    this.#entries.delete(order);
    if (e.position > 0) this.#byPosition.delete(e.position);
    const shardId = statusShardId(e.msg);
    if (shardId !== undefined) {
      if (this.#latestStatus.get(shardId) === order) this.#latestStatus.delete(shardId);
    }
  }
}

/** The shard a status message is about; undefined for other kinds. */
function statusShardId(msg: AgentMessageInit): string | undefined {
  return msg.msg?.case === "shard" ? (msg.msg.value.shardId ?? "") : undefined;
}
