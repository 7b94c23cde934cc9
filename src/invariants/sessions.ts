/**
 * Invariant 3, at most one current session per node, as the log shows it:
 * - a session id opens once;
 * - once a newer session of a node is in the log, the older one falls
 *   silent: its gateway closes it when it sees the newer one, so no event of
 *   the older session may be written (writer's clock) more than a grace
 *   period after the newer one was stored;
 * - commands reach only the current session: each command of a pass names
 *   the node's current session in the state the pass decided on (its
 *   observed sequence). A newer session opening between that state and the
 *   pass is a race the gateways resolve by dropping the command; a command
 *   for a session already superseded or closed in the state decided on is
 *   a violation.
 */
import type { FleetState } from "../projections/index.js";
import type { CheckedEvent, Violation } from "./types.js";

interface SessionInfo {
  nodeId: string;
  openedSeq: number;
  /** Stored time of the newer session that superseded it, when one did. */
  supersededAtMs?: number;
  supersededBy?: string;
  /** A stale event was already reported (one violation per session is enough). */
  reported?: boolean;
}

export class SessionRule {
  readonly violations: Violation[] = [];
  readonly #sessions = new Map<string, SessionInfo>();
  readonly #latest = new Map<string, string>();
  /** Per node: the current session after each change, in log order (null: none). */
  readonly #timeline = new Map<string, Array<{ seq: number; sessionId: string | null }>>();

  constructor(private readonly graceMs: number) {}

  /** Before folding: the event itself. */
  observe(r: CheckedEvent): void {
    const body = r.event.body;
    switch (body.case) {
      case "sessionOpened": {
        const v = body.value;
        const seen = this.#sessions.get(v.sessionId);
        if (seen) {
          this.violations.push({
            rule: "one-current-session",
            seq: r.seq,
            message: `session ${v.sessionId} of ${v.nodeId} opened again at ${r.seq} (first at ${seen.openedSeq})`,
          });
          return;
        }
        const previous = this.#latest.get(v.nodeId);
        const old = previous === undefined ? undefined : this.#sessions.get(previous);
        if (old && old.supersededAtMs === undefined) {
          old.supersededAtMs = r.timeMs;
          old.supersededBy = v.sessionId;
        }
        this.#sessions.set(v.sessionId, { nodeId: v.nodeId, openedSeq: r.seq });
        this.#latest.set(v.nodeId, v.sessionId);
        return;
      }
      case "hardwareChanged":
      case "usageChanged":
      case "shardStatus":
      case "commandResult":
        this.#fact(r, body.value.nodeId, body.value.sessionId);
        return;
      case "reconcilePass":
        this.#commands(r, body.value.commands, Number(body.value.observedSeq));
        return;
      default:
        return;
    }
  }

  /** After folding: records the current session of the nodes the event may have changed. */
  recordAfter(r: CheckedEvent, after: FleetState): void {
    const body = r.event.body;
    const nodes: string[] = [];
    if (body.case === "sessionOpened" || body.case === "sessionClosed") nodes.push(body.value.nodeId);
    else if (body.case === "reconcilePass") {
      for (const d of body.value.decisions)
        if (d.kind.case === "sessionsExpired") for (const s of d.kind.value.sessions) nodes.push(s.nodeId);
    }
    for (const nodeId of nodes) {
      const current = after.inventory.nodes.get(nodeId)?.session?.sessionId ?? null;
      let line = this.#timeline.get(nodeId);
      if (!line) {
        line = [];
        this.#timeline.set(nodeId, line);
      }
      if (line.at(-1)?.sessionId !== current) line.push({ seq: r.seq, sessionId: current });
    }
  }

  #fact(r: CheckedEvent, nodeId: string, sessionId: string): void {
    const s = this.#sessions.get(sessionId);
    if (!s) {
      this.violations.push({
        rule: "one-current-session",
        seq: r.seq,
        message: `event at ${r.seq} for ${nodeId} names session ${sessionId}, which never opened`,
      });
      return;
    }
    if (s.nodeId !== nodeId) {
      this.violations.push({
        rule: "one-current-session",
        seq: r.seq,
        message: `event at ${r.seq} for ${nodeId} names session ${sessionId}, which belongs to ${s.nodeId}`,
      });
      return;
    }
    const written = Number(r.event.timeUnixMs);
    if (s.supersededAtMs !== undefined && !s.reported && written > s.supersededAtMs + this.graceMs) {
      s.reported = true;
      this.violations.push({
        rule: "one-current-session",
        seq: r.seq,
        message: `session ${sessionId} of ${nodeId} still wrote an event (${r.event.body.case}) ${written - s.supersededAtMs} ms after the newer session ${s.supersededBy} was stored: two sessions live at once`,
      });
    }
  }

  #commands(
    r: CheckedEvent,
    commands: ReadonlyArray<{ commandId: string; nodeId: string; sessionId: string }>,
    observed: number,
  ): void {
    for (const c of commands) {
      const current = this.#currentAt(c.nodeId, observed);
      if (current === c.sessionId) continue;
      const why =
        current === null ? "the node had no current session" : `the node's current session was ${current}`;
      this.violations.push({
        rule: "command-to-stale-session",
        seq: r.seq,
        message: `pass at ${r.seq} sends command ${c.commandId} to session ${c.sessionId || "(none)"} of ${c.nodeId}, but at sequence ${observed} (the state it decided on) ${why}`,
      });
    }
  }

  #currentAt(nodeId: string, seq: number): string | null {
    const line = this.#timeline.get(nodeId);
    if (!line) return null;
    // Binary search for the last change at or before seq.
    let lo = 0;
    let hi = line.length - 1;
    let found: string | null = null;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      const e = line[mid]!;
      if (e.seq <= seq) {
        found = e.sessionId;
        lo = mid + 1;
      } else {
        hi = mid - 1;
      }
    }
    return found;
  }
}
