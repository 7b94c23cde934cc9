import type { Heartbeat } from "../../gen/llmgw/v1/agent_pb.js";
import type { CloseKind } from "./close.js";
import { sessionEventId } from "./event-ids.js";
import { nothing } from "./result.js";
import type { EventDraft, Note, SessionState, StepResult } from "./types.js";
import { flushWindow, observeHeartbeat, type PendingUsage, settle, worthWriting } from "./usage-window.js";

/** The usage event of `p`, numbered after the heartbeat it was last told in. */
function usageEvent(state: SessionState, p: PendingUsage): EventDraft {
  return {
    id: sessionEventId(state.sessionId, p.seq),
    body: {
      case: "usageChanged",
      value: {
        nodeId: state.nodeId,
        sessionId: state.sessionId,
        sessionSeq: BigInt(p.seq),
        gpuMemoryUsedMb: [...p.memory],
        newProblems: [...p.newProblems],
        gpuProblems: [...p.gpuProblems],
        shardLoad: [...p.load],
      },
    },
    ackId: undefined,
  };
}

/** A valid heartbeat (message `state.seq`) read at `at`: its usage event now, later, or never. */
export function heartbeat(state: SessionState, hb: Heartbeat, at: number): StepResult {
  const baseline = state.usage;
  if (!baseline) return nothing(state);
  const o = observeHeartbeat(state.usageWindow, baseline, state.config.usageIntervalMs, state.seq, hb, at);
  const next = { ...state, usage: o.baseline, usageWindow: o.window };
  const notes: Note[] = [];
  if (o.unknownGpus.length > 0) notes.push({ kind: "unknown-gpus", gpus: o.unknownGpus });
  if (o.coalesced) notes.push({ kind: "usage-coalesced" });
  if (o.droppedProblems > 0) notes.push({ kind: "problems-dropped", count: o.droppedProblems });
  return {
    ...nothing(next),
    events: o.write ? [usageEvent(next, o.write)] : [],
    timers: o.schedule ? ["usage-flush"] : [],
    notes,
  };
}

/** The usage interval ended: what waited is written, as of the interval's end (the window's `lastAt`). */
export function flushUsage(state: SessionState): StepResult {
  const baseline = state.usage;
  if (!baseline || state.phase !== "open") return nothing(state);
  const f = flushWindow(state.usageWindow, baseline, state.config.usageIntervalMs);
  const next = { ...state, usage: f.baseline, usageWindow: f.window };
  return { ...nothing(next), events: f.write ? [usageEvent(next, f.write)] : [] };
}

/**
 * Closes after which what waits for the interval's end is still written,
 * before the session-closed event, so the log ends with the session's
 * latest reading. Not after: a refusal (no session), a log that failed (it
 * would not take it), a newer session or an expiry (the log has moved on:
 * the node's next registration is its truth), an agent over its budget (it
 * is flooding; its next registration reports its memory and GPU problems),
 * a revoked certificate (what it says is no longer taken).
 */
const FLUSHED_AT_CLOSE: ReadonlySet<CloseKind> = new Set<CloseKind>([
  "disconnected",
  "silent",
  "protocol-error",
  "slow-consumer",
  "draining",
  "drain-deadline",
]);

/** `r` closed the session: the usage still waiting, if any, goes out first. */
export function withFinalUsage(r: StepResult): StepResult {
  const p = r.state.usageWindow.pending;
  const baseline = r.state.usage;
  if (!r.close || !p || !baseline || !FLUSHED_AT_CLOSE.has(r.close.kind)) return r;
  if (!worthWriting(p, baseline)) return r;
  const settled = settle(p, baseline);
  const state = {
    ...r.state,
    usage: settled.baseline,
    usageWindow: { ...r.state.usageWindow, flushPending: false, pending: undefined },
  };
  return { ...r, state, events: [...r.events, usageEvent(state, settled.written)] };
}
