/**
 * The node agent of a GPU machine: a client of the agent protocol (it imports
 * the generated code and nothing of the control plane) that discovers the
 * GPUs, supervises inference engines and keeps a stream to a gateway.
 */

export { certificateCommonName, TlsFiles, TlsFilesError } from "../tls/watched-files.js";
export {
  type AgentConfig,
  AgentConfigError,
  agentConfigSchema,
  CONFIG_PLACEHOLDER,
  loadAgentConfig,
  parseAgentConfig,
} from "./config.js";
export * from "./engine/index.js";
export * from "./gpus/index.js";
export {
  type GpuChange,
  HardwareWatch,
  type ProblemLedgerData,
  type ProblemLedgerStore,
  type SampleOutcome,
} from "./hardware-watch.js";
export * from "./install/index.js";
export { AgentMetrics } from "./metrics.js";
export {
  type CommandOutcome,
  type FabricInit,
  type GpuInit,
  type GpuSample,
  type GpuSeen,
  type GpuSource,
  NodeAgent,
  type NodeAgentActivity,
  type NodeAgentLogger,
  type NodeAgentOptions,
  type NodeHardwareInventory,
  type ProblemOccurrence,
  type SampledProblem,
  type ShardEvent,
  type ShardStartSpec,
  type ShardStateName,
  type ShardSupervisor,
  type SupervisedShard,
} from "./node-agent.js";
export { fileProblemLedger } from "./problem-ledger-file.js";
