/**
 * The simulator: fleets of the real node agent (src/agent) on simulated GPUs
 * (a GPU source reading a spec) and simulated engines (an engine host faking
 * processes, ports and the engines' HTTP — starts, faults, load, drains — in
 * process, under the real engine supervisor), used by `llmgw sim`,
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
export {
  SIM_ENGINE_PROGRAM,
  SimEngineHost,
  type SimEngineHostOptions,
  type SimEngineShard,
  simEnginesConfig,
} from "./engine-host.js";
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
export type {
  AgentSupervisor,
  LoadedShard,
  PreloadedShard,
  SimMachineContext,
  SimMachineEngines,
  SimMachineEnginesFactory,
  SimShard,
} from "./machine-engines.js";
export { SimNode, type SimNodeOptions } from "./node.js";
export {
  type H100NodeSpec,
  h100Hardware,
  type RegisterInit,
  type RegistrationState,
  type RunningShardInit,
  registrationOf,
} from "./registration.js";
export { SupervisedSimEngines, supervisedSimEngines } from "./supervised-engines.js";
