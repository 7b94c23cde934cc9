// The agent stream served on Node's HTTP/2 without Connect's per-message plumbing (gRPC and Connect, binary).
export { type AgentCallOptions, type AgentStreamHandler, serveAgentCall } from "./call.js";
// The framing alone, for clients that speak the agent stream without Connect (the benchmarks' agents).
export { EnvelopeReader, envelope } from "./envelopes.js";
export { directProtocol, protocolFamily } from "./protocol.js";
