// The agent stream served on Node's HTTP/2 without Connect's per-message plumbing (gRPC and Connect, binary).
export { type AgentCallOptions, type AgentStreamHandler, serveAgentCall } from "./call.js";
export { directProtocol } from "./protocol.js";
