import type { Event } from "../gen/llmgw/v1/events_pb.js";
import type { LoggedSession } from "./duplicates.js";

/** What the watch reads of a record of the log (a `LogRecord`, or the simulation's). */
export interface WatchedRecord {
  readonly seq: number;
  readonly event: Event;
}

/** What the watch needs of a session this gateway holds (an `AgentSession`, or the simulation's). */
export interface WatchedSession {
  readonly nodeId: string;
  readonly sessionId: string;
  /** Stream sequence of its session-opened event, 0 until stored. */
  readonly openedSeq: number;
  /** Ends the session: a newer one of its node, on `byGateway`, is in the log. */
  supersede(byGateway: string): void;
}

/** The sessions this gateway holds, by node (the `SessionRegistry`, or the simulation's). */
export interface HeldSessions<S extends WatchedSession> {
  forNode(nodeId: string): Iterable<S>;
}

interface Newest extends LoggedSession {
  seq: number;
}

/**
 * Newest session wins, across gateways (docs/ARCHITECTURE.md, "Gateway"). Every gateway follows
 * the session subjects; the log's order decides which session is newer.
 * When a session opens for a node this gateway holds an older session of,
 * the older one is closed. The newest opening per node is remembered so a
 * session whose own opening was overtaken before it was held is closed as
 * soon as it is held. Whether that newest session has closed since (its
 * SessionClosed, or the reconciler expiring its gateway's sessions) is
 * remembered too: the duplicate-identity check asks it about sessions held
 * by other gateways.
 *
 * Pure: records and sessions are its inputs, superseding a session its only
 * act, so the deterministic simulation (src/simulation) runs this same code
 * for its gateways. It must stay free of NATS, clocks and I/O.
 */
export class SessionsWatch<S extends WatchedSession = WatchedSession> {
  readonly #newest = new Map<string, Newest>();
  readonly #held: HeldSessions<S>;

  constructor(held: HeldSessions<S>) {
    this.#held = held;
  }

  /** Handles one event of the session subjects. */
  onRecord(r: WatchedRecord): void {
    const body = r.event.body;
    if (body.case === "sessionClosed") {
      this.#closed(body.value.nodeId, body.value.sessionId);
      return;
    }
    if (body.case !== "sessionOpened") return;
    const o = body.value;
    const prev = this.#newest.get(o.nodeId);
    if (!prev || prev.seq < r.seq) {
      this.#newest.set(o.nodeId, {
        sessionId: o.sessionId,
        gatewayId: o.gatewayId,
        seq: r.seq,
        instanceId: o.registration?.instanceId ?? "",
        remoteAddress: o.remoteAddress,
        closed: false,
      });
    }
    for (const s of this.#held.forNode(o.nodeId)) this.check(s);
  }

  /** Handles one reconciler pass: sessions it expired are closed. */
  onPass(r: WatchedRecord): void {
    const body = r.event.body;
    if (body.case !== "reconcilePass") return;
    for (const d of body.value.decisions) {
      if (d.kind.case !== "sessionsExpired") continue;
      for (const s of d.kind.value.sessions) this.#closed(s.nodeId, s.sessionId);
    }
  }

  /**
   * Handles one event of the gateway subjects: a gateway that started or
   * stopped holds none of the sessions it opened before (a gateway killed
   * and restarted under the same id keeps its lease, so the reconciler never
   * expires them).
   */
  onGatewayRecord(r: WatchedRecord): void {
    const body = r.event.body;
    if (body.case !== "gatewayStarted" && body.case !== "gatewayStopped") return;
    for (const n of this.#newest.values()) {
      if (n.gatewayId === body.value.gatewayId && n.seq < r.seq) n.closed = true;
    }
  }

  /** The node's newest session in the log, as far as this gateway followed it. */
  newest(nodeId: string): LoggedSession | undefined {
    return this.#newest.get(nodeId);
  }

  /**
   * Closes `s` if a newer session of its node is known. A session whose
   * opening is not stored yet has no place in the log's order: it is
   * checked once it is (when it is held).
   */
  check(s: S): void {
    const n = this.#newest.get(s.nodeId);
    if (n && s.openedSeq > 0 && n.seq > s.openedSeq && n.sessionId !== s.sessionId) s.supersede(n.gatewayId);
  }

  #closed(nodeId: string, sessionId: string): void {
    const n = this.#newest.get(nodeId);
    if (n?.sessionId === sessionId) n.closed = true;
  }
}
