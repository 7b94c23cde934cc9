import type { LogRecord } from "../log/index.js";
import type { SessionRegistry } from "./registry.js";
import type { AgentSession } from "./session.js";

interface Newest {
  sessionId: string;
  gatewayId: string;
  seq: number;
}

/**
 * Newest session wins, across gateways (docs/ARCHITECTURE.md, "Gateway"). Every gateway follows
 * the session subjects; the log's order decides which session is newer.
 * When a session opens for a node this gateway holds an older session of,
 * the older one is closed. The newest opening per node is remembered so a
 * session whose own opening was overtaken before it was held is closed as
 * soon as it is held.
 */
export class SessionsWatch {
  readonly #newest = new Map<string, Newest>();

  constructor(private readonly registry: SessionRegistry) {}

  /** Handles one event of the session subjects. */
  onRecord(r: LogRecord): void {
    const body = r.event.body;
    if (body.case !== "sessionOpened") return;
    const o = body.value;
    const prev = this.#newest.get(o.nodeId);
    if (!prev || prev.seq < r.seq) {
      this.#newest.set(o.nodeId, { sessionId: o.sessionId, gatewayId: o.gatewayId, seq: r.seq });
    }
    for (const s of this.registry.forNode(o.nodeId)) this.check(s);
  }

  /** Closes `s` if a newer session of its node is known. */
  check(s: AgentSession): void {
    const n = this.#newest.get(s.nodeId);
    if (n && n.seq > s.openedSeq && n.sessionId !== s.sessionId) s.supersede(n.gatewayId);
  }
}
