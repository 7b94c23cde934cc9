/**
 * Simulated GPU agents: a client of the agent protocol only (it imports the
 * generated code, never the log), used by `llmgw sim`, `llmgw dev`, tests and
 * benchmarks.
 */
export { AckTracker } from "../agent/client/index.js";
export { type AgentOptions, SimAgent, type SimShard } from "./agent.js";
export * from "./certs/index.js";
export {
  DEFAULT_GATEWAY_PORT,
  EXPECTED,
  parseSimConfig,
  type SimConfig,
  SimConfigError,
  type SimConfigField,
  type SimConfigInput,
  type SimConfigIssue,
} from "./config.js";
export type { AgentCounters, ShardStateName, SimEvent } from "./events.js";
export {
  FAULT_NAMES,
  type FaultName,
  type FaultSpec,
  NODE_FAULTS,
  parseFaultSpec,
  SHARD_FAULTS,
} from "./faults.js";
export { type FleetSummary, formatSummary, SimFleet } from "./fleet.js";
export { H100, type NodeHardware, nodeHardware } from "./hardware.js";
export { fleetNodeIds, invalidNodeIdReason, NODE_ID_RULE, nodeIds } from "./ids.js";
export {
  demandAt,
  type LoadCurve,
  type LoadSpec,
  parseLoadSpec,
  type ShardLoadReading,
  shardLoadAt,
} from "./load.js";
export {
  type H100NodeSpec,
  h100Hardware,
  type RegisterInit,
  type RegistrationState,
  type RunningShardInit,
  registrationOf,
} from "./registration.js";
