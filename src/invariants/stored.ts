/**
 * Invariant 2, no acknowledged event lost and a retried publish stored once:
 * every event id appears once in the log (the id is the publish's
 * Nats-Msg-Id, so a retry inside the duplicate window is dropped by the
 * server), and every message an agent saw acknowledged is in the log exactly
 * once, as event `<session>-<message>` of its node.
 */
import type { AckedMessage, CheckedEvent, Violation } from "./types.js";

export class StoredRule {
  readonly #byId = new Map<string, { seqs: number[]; nodeId: string | undefined }>();
  readonly #openedAt = new Map<string, number>();

  observe(r: CheckedEvent): void {
    const id = r.event.id;
    const seen = this.#byId.get(id);
    if (seen) seen.seqs.push(r.seq);
    else this.#byId.set(id, { seqs: [r.seq], nodeId: nodeOf(r) });
    if (r.event.body.case === "sessionOpened") this.#openedAt.set(r.event.body.value.sessionId, r.seq);
  }

  finish(acked: readonly AckedMessage[]): Violation[] {
    const out: Violation[] = [];
    for (const [id, e] of this.#byId) {
      if (e.seqs.length > 1) {
        out.push({
          rule: "stored-twice",
          seq: e.seqs[1]!,
          message: `event ${id} is stored ${e.seqs.length} times (sequences ${e.seqs.join(", ")})`,
        });
      }
    }
    for (const a of acked) {
      const id = `${a.sessionId}-${a.messageId}`;
      const e = this.#byId.get(id);
      if (!e) {
        const opened = this.#openedAt.get(a.sessionId);
        out.push({
          rule: "acked-lost",
          seq: opened ?? 0,
          message: `message ${a.messageId} of session ${a.sessionId} (${a.nodeId}) was acknowledged to the agent but is not in the log${opened === undefined ? " (nor is the session's opening)" : ` (session opened at ${opened})`}`,
        });
      } else if (e.nodeId !== undefined && e.nodeId !== a.nodeId) {
        out.push({
          rule: "acked-lost",
          seq: e.seqs[0]!,
          message: `message ${a.messageId} of session ${a.sessionId} was acknowledged to ${a.nodeId} but event ${id} at ${e.seqs[0]} is about ${e.nodeId}`,
        });
      }
    }
    return out.sort((x, y) => x.seq - y.seq);
  }
}

function nodeOf(r: CheckedEvent): string | undefined {
  const b = r.event.body;
  switch (b.case) {
    case "sessionOpened":
    case "sessionClosed":
    case "hardwareChanged":
    case "usageChanged":
    case "shardStatus":
    case "commandResult":
      return b.value.nodeId;
    default:
      return undefined;
  }
}
