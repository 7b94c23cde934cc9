import { Code } from "@connectrpc/connect";
import type { AgentMessage } from "../../gen/llmgw/v1/agent_pb.js";
import { invalidNodeIdReason } from "../../ids/node-id.js";
import { sessionEventId } from "../events.js";
import { registrationProblem } from "../registration.js";
import { UsageTracker } from "../usage.js";
import { fullBucket } from "./budget.js";
import { identify } from "./identify.js";
import { closeNow } from "./result.js";
import { capRegistration } from "./text-caps.js";
import type { SessionState, StepResult } from "./types.js";

/** A stream that is refused before it becomes a session. */
export function refuse(state: SessionState, code: Code, detail: string): StepResult {
  return closeNow(state, { kind: "refused", code, detail });
}

/**
 * The first message: a valid Register from the node the certificate names,
 * on a gateway that is not draining, becomes the session-opened event. The
 * session opens when the log stored it (a `stored` input for "register").
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
  return {
    state: {
      ...named,
      phase: "opening",
      seq: 1,
      cumulativeAcks: reg.cumulativeAcks,
      usage: new UsageTracker(config.usageThresholdMb, reg),
      budget: fullBucket(config.eventBudget, at),
      bytes: fullBucket(config.byteBudget, at),
    },
    events: [
      {
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
    ],
    replies: [],
    timers: [],
    notes: [
      { kind: "opened", identity: who.identity },
      ...(capped.fields.length > 0 ? [{ kind: "text-truncated" as const, fields: capped.fields }] : []),
    ],
  };
}
