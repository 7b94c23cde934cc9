/**
 * The simulator: fleets of the real node agent (src/agent) on simulated GPUs
 * (a GPU source reading a spec) and simulated engines (a supervisor faking
 * starts, faults, drains and load in process), used by `llmgw sim`,
 * `llmgw dev`, tests and benchmarks. A client of the agent protocol only (it
 * imports the generated code and the agent, never the log).
 */
export { AckTracker } from "../agent/client/index.js";
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
export { type PreloadedShard, SimEngines, type SimEnginesOptions, type SimShard } from "./engines.js";
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
export { SimGpus, type SimGpusOptions } from "./gpus.js";
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
export { SimNode, type SimNodeOptions } from "./node.js";
export {
  type H100NodeSpec,
  h100Hardware,
  type RegisterInit,
  type RegistrationState,
  type RunningShardInit,
  registrationOf,
} from "./registration.js";
