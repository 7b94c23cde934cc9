import type { Code } from "@connectrpc/connect";
import type { AgentMessage, ControlMessage, EngineLogChunk } from "../../gen/llmgw/v1/agent_pb.js";
import type { Bucket, ByteBudget, EventBudget } from "./budget.js";
import type { Close } from "./close.js";
import type { BodyInit } from "./event-ids.js";
import type { PeerIdentity } from "./peer-identity.js";
import type { CappedField, TextCaps } from "./text-caps.js";
import type { UsageBaseline } from "./usage.js";
import type { UsageWindow } from "./usage-window.js";

/** What the core knows of the gateway; fixed for the life of a stream. */
export interface CoreConfig {
  readonly gatewayId: string;
  readonly insecureDev: boolean;
  readonly usageThresholdMb: number;
  readonly registrationTimeoutMs: number;
  readonly heartbeatTimeoutMs: number;
  /** At most one usage event per session per this long (usage-window.ts). */
  readonly usageIntervalMs: number;
  /** Events a session may write (budget.ts). */
  readonly eventBudget: EventBudget;
  /** Bytes a session may write (budget.ts, event-bytes.ts). */
  readonly byteBudget: ByteBudget;
  /** Caps on the agent's free text (text-caps.ts). */
  readonly textCaps: TextCaps;
  /** Cumulative acks: stored messages one ack waits for while more are on their way (acks.ts). */
  readonly ackEvery: number;
  /** ... and the longest it waits for them (the `ack-later` timer). */
  readonly ackDelayMs: number;
}

/**
 * Where a stream is: waiting for its Register, waiting for the gateway to
 * admit it (an `admitted` input, or a `close` refusing it), waiting for the
 * log to store the session-opened event, open, or closing (nothing more
 * happens).
 */
export type Phase = "registering" | "admitting" | "opening" | "open" | "closing";

/**
 * One session's state: a value. `step` returns a new state and never
 * changes the one it is given (what did not change is shared between the
 * two), so a state may be stepped twice, kept, or compared.
 */
export interface SessionState {
  readonly config: CoreConfig;
  readonly peer: PeerIdentity;
  /** The agent's address (host:port), recorded in the session-opened event. */
  readonly remoteAddress: string;
  readonly phase: Phase;
  readonly nodeId: string;
  /** The id this session takes if it opens (ids are inputs: the core makes no randomness). */
  readonly sessionId: string;
  /** Sequence of the agent's last message (1 = the registration). */
  readonly seq: number;
  /** The registration's instance_id: which agent process this is ("" when it sent none). */
  readonly instanceId: string;
  /** How the agent's identity was established (undefined until the Register is read). */
  readonly identity: "mtls" | "insecure-dev" | undefined;
  /** Stream sequence of the session-opened event (0 until it is stored). */
  readonly openedSeq: number;
  /** The session-opened event, held while the gateway admits the stream. */
  readonly opening: EventDraft | undefined;
  /** What the log has of the session's usage (undefined until the Register is read). */
  readonly usage: UsageBaseline | undefined;
  /** The usage event waiting for the end of the usage interval, if any. */
  readonly usageWindow: UsageWindow;
  /** What is left of the session's event budget (undefined until the session opens). */
  readonly budget: Bucket | undefined;
  /** What is left of its byte budget (undefined until the session opens). */
  readonly bytes: Bucket | undefined;
  /** Events published that the agent is acked for once stored, not stored yet. */
  readonly onTheWay: number;
  /** The agent registered with cumulative_acks: acks waiting to be written may be merged. */
  readonly cumulativeAcks: boolean;
  /** The newest stored message not yet acknowledged to a cumulative-ack agent. */
  readonly ackThrough: string | undefined;
  /** Stored messages waiting for that ack. */
  readonly ackHeld: number;
  /** Which timer writes it: at the end of the turn, or `ack-later`; "none" while no ack waits. */
  readonly ackFlush: "none" | "turn-end" | "later";
  readonly close: Close | undefined;
}

/** Timers the shell runs for the core; their firing comes back as a `timer` input. */
export type TimerKind =
  | "read-deadline"
  /** Writes the waiting cumulative ack at the end of the event loop's turn. */
  | "ack-flush"
  /** Writes the waiting cumulative ack after `config.ackDelayMs` (more acks are coming). */
  | "ack-later"
  /** The usage interval ends; due after `usageFlushDelayMs`. */
  | "usage-flush";

/** What the session reacts to. */
export type Input =
  /**
   * The agent's next message; `draining`: the gateway was draining when it
   * came; `at`: when it was read (ms of the shell's monotonic clock).
   */
  | { kind: "message"; message: AgentMessage; draining: boolean; at: number }
  /** The agent ended its side of the stream (everything published before is stored). */
  | { kind: "stream-ended" }
  /** Reading the stream failed; `aborted`: the connection had gone. */
  | { kind: "stream-failed"; code: Code; detail: string; aborted: boolean }
  /** The gateway admits the stream whose Register was read (a refusal is a `close` of kind `refused`). */
  | { kind: "admitted" }
  /**
   * The log stored, at stream sequence `seq`, the event the agent is acked
   * for with `messageId` ("register" for the session-opened event). Every
   * such event the core drafted comes back as one, in order.
   */
  | { kind: "stored"; messageId: string; seq: number }
  /** The log did not take an event; `unavailable`: it could not be reached. */
  | { kind: "log-failed"; unavailable: boolean; detail: string }
  | { kind: "timer"; timer: TimerKind }
  /** The connection ended under the handler. */
  | { kind: "disconnected" }
  /** A newer session for this node opened on gateway `byGateway`. */
  | { kind: "superseded"; byGateway: string }
  /** The gateway drains: tell the agent to reconnect elsewhere, then end the stream. */
  | { kind: "drain"; reason: string; retryAfterMs: number }
  /** The drain deadline passed. */
  | { kind: "drain-deadline"; detail: string }
  /** The send queue is full: the agent is `behind` messages behind. */
  | { kind: "send-queue-full"; behind: number }
  /** Closed from outside (the reconciler expired the session, the gateway lost the log). */
  | { kind: "close"; close: Close };

/** An event to append, as an id and a body (the shell stamps writer and time). */
export interface EventDraft {
  readonly id: string;
  readonly body: BodyInit;
  /** The agent is acknowledged with this message id once the log stored the event. */
  readonly ackId: string | undefined;
}

/**
 * A message for the agent. `ack`: one acknowledgement; `cumulative-ack`:
 * replaces an ack still waiting in the send queue; `register-ack` and
 * `reconnect` are written whatever the queue holds.
 */
export interface Reply {
  readonly kind: "ack" | "cumulative-ack" | "register-ack" | "reconnect";
  readonly message: ControlMessage;
}

/** What the shell logs or counts. */
export type Note =
  /** The Register was read and is valid: the stream is node `state.nodeId`'s, session `state.sessionId`. */
  | { kind: "opened"; identity: "mtls" | "insecure-dev" }
  /** The session-opened event is stored at stream sequence `seq`: the session is open. */
  | { kind: "open"; seq: number; gpus: number; identity: string }
  | { kind: "ack-coalesced" }
  /** Heartbeat GPU problems on GPUs the registration does not list: dropped, with a warning. */
  | { kind: "unknown-gpus"; gpus: number[] }
  | { kind: "unknown-message"; seq: number }
  /** A heartbeat's news waits for the end of the usage interval (merged into its one event). */
  | { kind: "usage-coalesced" }
  /** New problems past the bound of one interval's event, not recorded. */
  | { kind: "problems-dropped"; count: number }
  /** Free text over its cap, cut with a marker (text-caps.ts). */
  | { kind: "text-truncated"; fields: readonly CappedField[] }
  /** Engine output an agent sent for a log request (src/gateway/engine-logs). */
  | { kind: "engine-log"; chunk: EngineLogChunk };

export interface StepResult {
  readonly state: SessionState;
  readonly events: readonly EventDraft[];
  readonly replies: readonly Reply[];
  /** The session closes (only ever once). */
  readonly close?: Close;
  /** Timers to start. */
  readonly timers: readonly TimerKind[];
  readonly notes: readonly Note[];
}
