// The deterministic simulation of the whole control plane (`llmgw simulate`). Everything public is named here.

export type { StoredRecord } from "./memory-log.js";
export {
  FAULT_KINDS,
  type FaultKind,
  parseFaultList,
  parseSimulationOptions,
  type SimulationInput,
  type SimulationOptions,
} from "./options.js";
export { runSeed, type SeedFailure, type SeedResult, type SimInvariant } from "./run.js";
export { type RunsOutcome, type RunsSummary, runSeeds } from "./runs.js";
export { Scheduler } from "./scheduler.js";
export { eachTurn } from "./turn.js";
export { SIM_EPOCH_MS } from "./world.js";
