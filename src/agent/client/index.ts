/**
 * The client side of the agent protocol, shared by the simulator and the real
 * node agent: the stream to a gateway (reconnect with jittered backoff,
 * Reconnect honoured), the acks of a stream, and the outbox of what was said
 * and not yet acknowledged.
 */
export { AckTracker } from "./acks.js";
export { reconnectDelayMs } from "./backoff.js";
export { type AgentClock, SYSTEM_CLOCK, type TimerHandle } from "./clock.js";
export {
  AgentConnection,
  type ConnectionEvent,
  type ConnectionOptions,
  type HeartbeatInit,
  type RegisterInit,
} from "./connection.js";
export { invalidNodeIdReason, NODE_ID_RULE } from "./node-id.js";
export { type AgentMessageInit, UnackedOutbox } from "./outbox.js";
export {
  type AgentConnect,
  type AgentStreamClient,
  type AgentStreamConnection,
  connectAgent,
  type TlsIdentity,
} from "./transport.js";
