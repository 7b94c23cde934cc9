/**
 * Command results answer the command they name only from the node and
 * session it was addressed to; the fold refuses others (they change
 * nothing) and counts them (`replicas.refusedResults`). Each one refused is
 * reported here, naming the sequence, the node that sent it and where the
 * command went: a node answering other nodes' commands is broken or hostile.
 */
import type { FleetState } from "../projections/index.js";
import type { CheckedEvent, Violation } from "./types.js";

export class ResultAddressRule {
  readonly violations: Violation[] = [];

  /** After folding: whether the fold refused this event as a result for another node's or session's command. */
  recordAfter(r: CheckedEvent, after: FleetState): void {
    const body = r.event.body;
    if (body.case !== "commandResult") return;
    const refused = after.replicas.refusedResults?.[body.value.nodeId];
    if (refused?.lastSeq !== r.seq) return;
    this.violations.push({
      rule: "result-not-addressed",
      seq: r.seq,
      message: `command result at ${r.seq} from ${body.value.nodeId} (session ${body.value.sessionId}) names command ${refused.lastCommandId}, addressed to ${refused.addressedNodeId} (session ${refused.addressedSessionId}): refused, not folded`,
    });
  }
}
