import { Code } from "@connectrpc/connect";
import { ackedIn, flushAck, stored } from "./acks.js";
import { overBudgetDetail, overByteBudgetDetail, spend } from "./budget.js";
import { isProtocolCode } from "./close.js";
import { eventBytes } from "./event-bytes.js";
import { agentMessage } from "./messages.js";
import { admitted, openedStored, refuse, registerFirst } from "./open.js";
import type { PeerIdentity } from "./peer-identity.js";
import { reconnect } from "./replies.js";
import { closeNow, nothing } from "./result.js";
import type { CoreConfig, Input, SessionState, StepResult } from "./types.js";
import { flushUsage, withFinalUsage } from "./usage-steps.js";
import { EMPTY_WINDOW, flushDelayMs } from "./usage-window.js";

/** A stream that has just opened: it waits for its Register. */
export function initialState(
  config: CoreConfig,
  peer: PeerIdentity,
  sessionId: string,
  remoteAddress = "",
): SessionState {
  return {
    config,
    peer,
    remoteAddress,
    phase: "registering",
    nodeId: "",
    sessionId,
    seq: 0,
    instanceId: "",
    identity: undefined,
    openedSeq: 0,
    opening: undefined,
    usage: undefined,
    usageWindow: EMPTY_WINDOW,
    budget: undefined,
    bytes: undefined,
    onTheWay: 0,
    cumulativeAcks: false,
    ackThrough: undefined,
    ackHeld: 0,
    ackFlush: "none",
    close: undefined,
  };
}

/** How long the shell waits for the agent's next message before a `read-deadline` timer input. */
export function readDeadlineMs(state: SessionState): number {
  return state.phase === "registering" ? state.config.registrationTimeoutMs : state.config.heartbeatTimeoutMs;
}

/** The gateway must say whether it admits the stream (an `admitted` input, or a `close` refusing it). */
export function awaitsAdmission(state: SessionState): boolean {
  return state.phase === "admitting";
}

/** How long after `now` (the shell's monotonic clock) the `usage-flush` timer is due. */
export function usageFlushDelayMs(state: SessionState, now: number): number {
  return flushDelayMs(state.usageWindow, state.config.usageIntervalMs, now);
}

/**
 * The session's one decision: what `input` does to `state`, which events it
 * publishes, what the agent is sent and whether the session closes. Pure:
 * no I/O, no clock, no randomness (docs/ARCHITECTURE.md, "Gateway").
 */
export function step(state: SessionState, input: Input): StepResult {
  if (state.phase === "closing") return nothing(state);
  const r = decide(state, input);
  const at = state.phase === "open" ? writtenAt(input, r) : undefined;
  return withFinalUsage(at === undefined ? r : withinBudget(r, at));
}

/**
 * When the events of an open session's step are written, for its budget: a
 * message's when it was read, a usage flush's at the end of its interval.
 * Other inputs write no events, except the last usage at a close, which is
 * not charged (the session ends).
 */
function writtenAt(input: Input, r: StepResult): number | undefined {
  if (input.kind === "message") return input.at;
  if (input.kind === "timer" && input.timer === "usage-flush") return r.state.usageWindow.lastAt;
  return undefined;
}

/**
 * Pays for the events of `r` (written at `at`) from the session's budgets,
 * in events and in bytes, or closes the session instead of writing them
 * (EVENT_BUDGET). The events the agent is acked for are counted as on their
 * way here, in the state the step makes anyway (acks.ts).
 */
function withinBudget(r: StepResult, at: number): StepResult {
  const { budget, bytes } = r.state;
  if (r.events.length === 0 || !budget || !bytes) return r;
  const config = r.state.config;
  const left = spend(budget, config.eventBudget, r.events.length, at);
  if (!left) return closeNow(r.state, { kind: "event-budget", detail: overBudgetDetail(config.eventBudget) });
  let size = 0;
  for (const e of r.events) size += eventBytes(e.id, e.body);
  const bytesLeft = spend(bytes, config.byteBudget, size, at);
  if (!bytesLeft)
    return closeNow(r.state, { kind: "byte-budget", detail: overByteBudgetDetail(config.byteBudget) });
  return {
    ...r,
    state: { ...r.state, budget: left, bytes: bytesLeft, onTheWay: r.state.onTheWay + ackedIn(r.events) },
  };
}

function decide(state: SessionState, input: Input): StepResult {
  switch (input.kind) {
    case "message":
      if (state.phase === "registering") return registerFirst(state, input.message, input.draining, input.at);
      if (state.phase !== "open") return nothing(state); // the shell reads nothing before the session opens
      return agentMessage(state, input.message, input.at);
    case "admitted":
      return admitted(state);
    case "stream-ended":
      if (state.phase !== "open") {
        return refuse(state, Code.InvalidArgument, "the stream ended before a Register");
      }
      // The agent is done sending, not done listening: the acks of what it
      // sent last reach it before the stream ends.
      return closeNow(state, { kind: "disconnected", detail: "the agent closed the stream" });
    case "stream-failed":
      if (state.phase !== "open") return refuse(state, input.code, input.detail);
      if (input.aborted || !isProtocolCode(input.code)) {
        return closeNow(state, { kind: "disconnected", detail: `the stream failed: ${input.detail}` });
      }
      return closeNow(state, { kind: "protocol-error", code: input.code, detail: input.detail });
    case "stored":
      if (state.phase === "opening") return openedStored(state, input.seq);
      return state.phase === "open" ? stored(state, input.messageId) : nothing(state);
    case "log-failed":
      if (state.phase === "opening") {
        return refuse(
          state,
          Code.Unavailable,
          `the log did not take the session; retry (possibly on another gateway): ${input.detail}`,
        );
      }
      return closeNow(state, {
        kind: input.unavailable ? "log-unavailable" : "log-failed",
        detail: `the log did not take the agent's message: ${input.detail}`,
      });
    case "timer":
      switch (input.timer) {
        case "ack-flush":
        case "ack-later":
          return flushAck(state);
        case "usage-flush":
          return flushUsage(state);
        case "read-deadline":
          if (state.phase === "registering") {
            return refuse(
              state,
              Code.DeadlineExceeded,
              `no Register within ${state.config.registrationTimeoutMs} ms of opening the stream`,
            );
          }
          return closeNow(state, {
            kind: "silent",
            detail: `no message within the heartbeat timeout (${state.config.heartbeatTimeoutMs} ms)`,
          });
        default: {
          const never: never = input.timer;
          throw new Error(`unknown timer ${String(never)}`);
        }
      }
    case "disconnected":
      return closeNow(state, { kind: "disconnected", detail: "the connection ended" });
    case "superseded":
      return closeNow(state, {
        kind: "superseded",
        detail: `superseded by a newer session on gateway ${input.byGateway}`,
      });
    case "drain":
      return closeNow(state, { kind: "draining", detail: input.reason }, [
        { kind: "reconnect", message: reconnect(input.reason, input.retryAfterMs) },
      ]);
    case "drain-deadline":
      return closeNow(state, { kind: "drain-deadline", detail: input.detail });
    case "send-queue-full":
      return closeNow(state, {
        kind: "slow-consumer",
        detail: `the agent is ${input.behind} messages behind (send queue full); disconnected`,
      });
    case "close":
      return closeNow(state, input.close);
    default: {
      const never: never = input;
      throw new Error(`unknown session input ${JSON.stringify(never)}`);
    }
  }
}
