import type { AgentSession } from "./session.js";

/** The sessions this gateway holds, by session id and by node. */
export class SessionRegistry {
  readonly #byId = new Map<string, AgentSession>();
  readonly #byNode = new Map<string, Set<AgentSession>>();

  get size(): number {
    return this.#byId.size;
  }

  add(s: AgentSession): void {
    this.#byId.set(s.sessionId, s);
    let set = this.#byNode.get(s.nodeId);
    if (!set) {
      set = new Set();
      this.#byNode.set(s.nodeId, set);
    }
    set.add(s);
  }

  remove(s: AgentSession): void {
    if (this.#byId.get(s.sessionId) === s) this.#byId.delete(s.sessionId);
    const set = this.#byNode.get(s.nodeId);
    set?.delete(s);
    if (set?.size === 0) this.#byNode.delete(s.nodeId);
  }

  get(sessionId: string): AgentSession | undefined {
    return this.#byId.get(sessionId);
  }

  forNode(nodeId: string): AgentSession[] {
    return [...(this.#byNode.get(nodeId) ?? [])];
  }

  all(): AgentSession[] {
    return [...this.#byId.values()];
  }
}
