// `llmgw logs` through the gateway: the API's requests to the agents whose streams it holds, and their answers.
export { DEFAULT_BRIDGE_LIMITS, EngineLogBridge, type EngineLogBridgeLimits } from "./bridge.js";
