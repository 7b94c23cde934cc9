/**
 * CommandUndeliverable reports are true to the log: each names a command an
 * earlier pass issued (same id, attempt, node and session) and a session the
 * reporting gateway held (its SessionOpened names that gateway), and each
 * command attempt is reported at most once. A gateway that reported a
 * command it never relayed, or a session it never held, would make the
 * reconciler re-plan a replica that was fine.
 */
import type { CheckedEvent, Violation } from "./types.js";

interface Issued {
  nodeId: string;
  sessionId: string;
  attempts: Set<number>;
}

export class UndeliverableRule {
  readonly violations: Violation[] = [];
  readonly #commands = new Map<string, Issued>();
  /** Session id → the gateway its SessionOpened names. */
  readonly #heldBy = new Map<string, string>();
  readonly #reported = new Set<string>();

  observe(r: CheckedEvent): void {
    const body = r.event.body;
    switch (body.case) {
      case "sessionOpened":
        this.#heldBy.set(body.value.sessionId, body.value.gatewayId);
        return;
      case "reconcilePass":
        for (const c of body.value.commands) {
          const known = this.#commands.get(c.commandId);
          if (known) known.attempts.add(c.attempt);
          else
            this.#commands.set(c.commandId, {
              nodeId: c.nodeId,
              sessionId: c.sessionId,
              attempts: new Set([c.attempt]),
            });
        }
        return;
      case "commandUndeliverable": {
        const v = body.value;
        const what = `command ${v.commandId} (attempt ${v.attempt}) reported undeliverable by gateway ${v.gatewayId} at ${r.seq}`;
        const bad = (why: string) =>
          this.violations.push({ rule: "command-undeliverable", seq: r.seq, message: `${what}: ${why}` });
        const c = this.#commands.get(v.commandId);
        if (!c?.attempts.has(v.attempt)) bad("no earlier pass issued that command attempt");
        else if (c.nodeId !== v.nodeId || c.sessionId !== v.sessionId)
          bad(
            `the command was for ${c.nodeId} session ${c.sessionId}, not ${v.nodeId} session ${v.sessionId}`,
          );
        const holder = this.#heldBy.get(v.sessionId);
        if (holder !== v.gatewayId)
          bad(
            holder === undefined
              ? `session ${v.sessionId} never opened`
              : `session ${v.sessionId} was held by gateway ${holder}`,
          );
        const key = `${v.commandId}\u0000${v.attempt}`;
        if (this.#reported.has(key)) bad("reported more than once");
        this.#reported.add(key);
        return;
      }
      default:
        return;
    }
  }
}
