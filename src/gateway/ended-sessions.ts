/**
 * The sessions this gateway held that have ended, remembered for a while so
 * that a command still addressed to one of them is reported undeliverable
 * (CommandUndeliverable) instead of being dropped like a command for a
 * session another gateway holds. Bounded by count and by age: a command
 * for a session that ended longer ago than that is overtaken anyway (the
 * reconciler has seen the SessionClosed and addresses the next session).
 */
export interface EndedSession {
  nodeId: string;
  /** Why it ended, as the session-closed event says. */
  detail: string;
  endedAtMs: number;
}

export const ENDED_SESSIONS_MAX = 10_000;
export const ENDED_SESSIONS_TTL_MS = 5 * 60_000;

export class EndedSessions {
  /** Insertion order is end order: the first entry is the oldest. */
  readonly #byId = new Map<string, EndedSession>();

  constructor(
    private readonly max = ENDED_SESSIONS_MAX,
    private readonly ttlMs = ENDED_SESSIONS_TTL_MS,
  ) {}

  add(sessionId: string, s: EndedSession): void {
    this.#byId.delete(sessionId);
    this.#byId.set(sessionId, s);
    this.#evict(s.endedAtMs);
  }

  get(sessionId: string, nowMs: number): EndedSession | undefined {
    this.#evict(nowMs);
    return this.#byId.get(sessionId);
  }

  get size(): number {
    return this.#byId.size;
  }

  #evict(nowMs: number): void {
    for (const [id, s] of this.#byId) {
      if (this.#byId.size <= this.max && nowMs - s.endedAtMs < this.ttlMs) return;
      this.#byId.delete(id);
    }
  }
}
