import { Code } from "@connectrpc/connect";
import type { AgentMessage } from "../../gen/llmgw/v1/agent_pb.js";
import { invalidNodeIdReason } from "../../ids/node-id.js";
import { ackedIn } from "./acks.js";
import { fullBucket } from "./budget.js";
import { sessionEventId } from "./event-ids.js";
import { identify } from "./identify.js";
import { registrationProblem } from "./registration.js";
import { ack } from "./replies.js";
import { closeNow, NONE, nothing } from "./result.js";
import { capRegistration } from "./text-caps.js";
import type { Note, SessionState, StepResult } from "./types.js";
import { usageBaseline } from "./usage.js";

/** A stream that is refused before it becomes a session. */
export function refuse(state: SessionState, code: Code, detail: string): StepResult {
  return closeNow(state, { kind: "refused", code, detail });
}

/**
 * The first message: a valid Register from the node the certificate names,
 * on a gateway that is not draining, is held for the gateway to admit
 * (`admitted`), then becomes the session-opened event. The session opens
 * when the log stored it (a `stored` input for "register").
 */
export function registerFirst(
  state: SessionState,
  message: AgentMessage,
  draining: boolean,
  at: number,
): StepResult {
  const msg = message.msg;
  if (msg.case !== "register") {
    return refuse(
      state,
      Code.InvalidArgument,
      `the first message must be a Register, got ${msg.case ?? "an empty message"}`,
    );
  }
  const capped = capRegistration(msg.value, state.config.textCaps);
  const reg = capped.value;
  const bad = invalidNodeIdReason(reg.nodeId, "node_id");
  if (bad) return refuse(state, Code.InvalidArgument, bad);
  const who = identify(state.peer, reg.nodeId, state.config.insecureDev);
  if ("refused" in who) return refuse(state, who.refused.code, who.refused.detail);
  const named = { ...state, nodeId: reg.nodeId };
  const problem = registrationProblem(reg);
  if (problem) return refuse(named, Code.InvalidArgument, `invalid registration: ${problem}`);
  if (draining) {
    return refuse(
      named,
      Code.Unavailable,
      `gateway ${state.config.gatewayId} is draining; connect to another gateway`,
    );
  }
  const { sessionId, config } = state;
  const notes: Note[] = [{ kind: "opened", identity: who.identity }];
  if (capped.fields.length > 0) notes.push({ kind: "text-truncated", fields: capped.fields });
  return {
    state: {
      ...named,
      phase: "admitting",
      seq: 1,
      instanceId: reg.instanceId,
      identity: who.identity,
      cumulativeAcks: reg.cumulativeAcks,
      usage: usageBaseline(config.usageThresholdMb, reg),
      budget: fullBucket(config.eventBudget, at),
      bytes: fullBucket(config.byteBudget, at),
      opening: {
        id: sessionEventId(sessionId, 1),
        body: {
          case: "sessionOpened",
          value: {
            nodeId: reg.nodeId,
            sessionId,
            gatewayId: config.gatewayId,
            registration: reg,
            identity: who.identity,
            remoteAddress: state.remoteAddress,
          },
        },
        ackId: "register",
      },
    },
    events: NONE,
    replies: NONE,
    timers: NONE,
    notes,
  };
}

/** The gateway admitted the stream: its session-opened event is published. */
export function admitted(state: SessionState): StepResult {
  const opened = state.opening;
  if (state.phase !== "admitting" || !opened) return nothing(state);
  const events = [opened];
  return {
    ...nothing({
      ...state,
      phase: "opening",
      opening: undefined,
      onTheWay: state.onTheWay + ackedIn(events),
    }),
    events,
  };
}

/** The log stored the session-opened event at `seq`: the session is open, and the agent is told. */
export function openedStored(state: SessionState, seq: number): StepResult {
  return {
    ...nothing({ ...state, phase: "open", openedSeq: seq, onTheWay: state.onTheWay - 1 }),
    replies: [{ kind: "register-ack", message: ack("register", state.sessionId) }],
    notes: [{ kind: "open", seq, gpus: state.usage?.gpus.size ?? 0, identity: state.identity ?? "" }],
  };
}
