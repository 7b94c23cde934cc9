import type { LogRecord } from "../log/index.js";
import type { LoggedSession } from "./duplicates.js";
import type { SessionRegistry } from "./registry.js";
import type { AgentSession } from "./session.js";

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
 */
export class SessionsWatch {
  readonly #newest = new Map<string, Newest>();

  constructor(private readonly registry: SessionRegistry) {}

  /** Handles one event of the session subjects. */
  onRecord(r: LogRecord): void {
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
    for (const s of this.registry.forNode(o.nodeId)) this.check(s);
  }

  /** Handles one reconciler pass: sessions it expired are closed. */
  onPass(r: LogRecord): void {
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
  onGatewayRecord(r: LogRecord): void {
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

  /** Closes `s` if a newer session of its node is known. */
  check(s: AgentSession): void {
    const n = this.#newest.get(s.nodeId);
    if (n && n.seq > s.openedSeq && n.sessionId !== s.sessionId) s.supersede(n.gatewayId);
  }

  #closed(nodeId: string, sessionId: string): void {
    const n = this.#newest.get(nodeId);
    if (n?.sessionId === sessionId) n.closed = true;
  }
}
