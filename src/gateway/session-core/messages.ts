import { Code } from "@connectrpc/connect";
import type { AgentMessage } from "../../gen/llmgw/v1/agent_pb.js";
import { type BodyInit, sessionEventId } from "./event-ids.js";
import {
  commandResultProblem,
  heartbeatProblem,
  registrationProblem,
  shardStatusProblem,
} from "./registration.js";
import { closeNow, NONE, nothing } from "./result.js";
import { type Capped, capCommandResult, capHeartbeat, capRegistration, capShardStatus } from "./text-caps.js";
import type { Note, SessionState, StepResult } from "./types.js";
import { reregistered } from "./usage.js";
import { heartbeat } from "./usage-steps.js";
import { afterRegistration } from "./usage-window.js";

/**
 * A message of an open session: the event it becomes (if any), and whether
 * the agent gets an ack for it once the log stored it. A message the
 * gateway refuses closes the session (PROTOCOL_ERROR, InvalidArgument).
 */
export function agentMessage(prev: SessionState, m: AgentMessage, at: number): StepResult {
  const seq = prev.seq + 1;
  const state = { ...prev, seq };
  const msg = m.msg;
  switch (msg.case) {
    case "register": {
      const capped = capRegistration(msg.value, state.config.textCaps);
      const reg = capped.value;
      if (reg.nodeId !== state.nodeId) {
        return refuse(
          state,
          `re-registration names node ${JSON.stringify(reg.nodeId)} but this stream is node ${JSON.stringify(state.nodeId)}`,
        );
      }
      const bad = registrationProblem(reg);
      if (bad) return refuse(state, `invalid registration: ${bad}`);
      return noted(
        event(state, { case: "hardwareChanged", value: { ...ids(state), registration: reg } }, true, {
          ...state,
          usage: state.usage && reregistered(state.usage, reg),
          usageWindow: afterRegistration(state.usageWindow),
        }),
        capped,
      );
    }
    case "heartbeat": {
      const bad = heartbeatProblem(msg.value);
      if (bad) return refuse(state, `invalid heartbeat: ${bad}`);
      const capped = capHeartbeat(msg.value, state.config.textCaps);
      return noted(heartbeat(state, capped.value, at), capped);
    }
    case "shard": {
      const bad = shardStatusProblem(msg.value);
      if (bad) return refuse(state, `invalid shard status: ${bad}`);
      // Built in place: the kind most messages are, so no object in between.
      const { nodeId, sessionId } = state;
      const capped = capShardStatus(msg.value, state.config.textCaps);
      const status = capped.value;
      return noted(
        event(
          state,
          { case: "shardStatus", value: { nodeId, sessionId, sessionSeq: BigInt(seq), status } },
          true,
        ),
        capped,
      );
    }
    case "result": {
      const bad = commandResultProblem(msg.value);
      if (bad) return refuse(state, `invalid command result: ${bad}`);
      const capped = capCommandResult(msg.value, state.config.textCaps);
      return noted(
        event(state, { case: "commandResult", value: { ...ids(state), result: capped.value } }, true),
        capped,
      );
    }
    case "engineLog":
      // Engine output for `llmgw logs`: relayed to whoever asked (the shell's
      // note), never an event and never acknowledged; it counts as a message.
      return { ...nothing(state), notes: [{ kind: "engine-log", chunk: msg.value }] };
    case undefined:
      // A kind this gateway does not know (a newer agent) or an empty
      // message: it keeps the session alive but is not recorded.
      return { ...nothing(state), notes: [{ kind: "unknown-message", seq }] };
    default: {
      const never: never = msg;
      return closeNow(state, {
        kind: "protocol-error",
        code: Code.Internal,
        detail: `unknown agent message ${JSON.stringify(never)}`,
      });
    }
  }
}

/** `r` with a note of the fields `capped` cut, if any (no copy when none was). */
function noted(r: StepResult, capped: Capped<unknown>): StepResult {
  if (capped.fields.length === 0) return r;
  const note: Note = { kind: "text-truncated", fields: capped.fields };
  return { ...r, notes: [...r.notes, note] };
}

/** What names the session's event of its message `state.seq`. */
function ids(state: SessionState): { nodeId: string; sessionId: string; sessionSeq: bigint } {
  return { nodeId: state.nodeId, sessionId: state.sessionId, sessionSeq: BigInt(state.seq) };
}

/** The message refused: the session closes (PROTOCOL_ERROR, InvalidArgument). */
function refuse(state: SessionState, detail: string): StepResult {
  return closeNow(state, { kind: "protocol-error", code: Code.InvalidArgument, detail });
}

/** The message becomes one event (numbered by the message's sequence), acked once stored when `acked`. */
function event(state: SessionState, body: BodyInit, acked: boolean, next = state): StepResult {
  const seq = state.seq;
  return {
    state: next,
    events: [{ id: sessionEventId(state.sessionId, seq), body, ackId: acked ? String(seq) : undefined }],
    replies: NONE,
    timers: NONE,
    notes: NONE,
  };
}
