// Connection hygiene of the control plane's listeners: caps, deadlines and HTTP/2 abuse limits.
export { capConnections } from "./caps.js";
export { defaultMaxConnections, openFileLimit } from "./fd-limit.js";
export {
  guardSessions,
  http2SecureServerOptions,
  http2ServerOptions,
  type SessionGuardOptions,
} from "./http2-sessions.js";
export {
  type ConnectionCaps,
  ConnectionCapsSchema,
  type Http1Limits,
  type Http1LimitsInput,
  Http1LimitsSchema,
  type Http2Limits,
  type Http2LimitsInput,
  Http2LimitsSchema,
  RESET_WINDOW_MS,
} from "./limits.js";
export { ConnectionMetrics, type GuardReason } from "./metrics.js";
