import type { Code } from "@connectrpc/connect";
import type { Logger } from "pino";
import type { EngineLogChunk } from "../gen/llmgw/v1/agent_pb.js";
import type { GatewayConfig } from "./config.js";
import type { GatewayMetrics } from "./metrics.js";
import type { Publisher } from "./publisher.js";
import type { AgentSession } from "./session.js";

/** What a session needs from its gateway. */
export interface SessionHost {
  readonly config: GatewayConfig;
  readonly publisher: Publisher;
  readonly metrics: GatewayMetrics;
  readonly logger: Logger;
  readonly draining: boolean;
  /** The session is in the log: route commands to it (and close it at once if it is already superseded). */
  hold(session: AgentSession): void;
  /** The session ended: route nothing more to it. */
  release(session: AgentSession): void;
  /**
   * Asked once the Register is read, before the session opens: a refusal
   * keeps the stream out (a revoked identity, a second agent with the
   * identity of a live session). With `retryAfterMs` the agent is told to
   * reconnect after that long before the stream ends with `code`.
   */
  admit(session: AgentSession): Refusal | undefined;
  /** Engine output the agent sent for a log request (src/gateway/engine-logs); absent: dropped. */
  engineLog?(session: AgentSession, chunk: EngineLogChunk): void;
}

/** Why a stream is kept out at registration. */
export interface Refusal {
  code: Code;
  detail: string;
  retryAfterMs?: number;
}
