/** Engine supervision: templated commands, detached process groups, readiness, adoption across agent restarts. */
export {
  type EngineConfig,
  type EngineMetricsConfig,
  type EnginesConfig,
  engineSchema,
  enginesSchema,
  READY_INTERVAL_MS,
} from "./config.js";
export { type EngineHost, type EngineSpawn, type EngineSpawned, osEngineHost } from "./engine-host.js";
export type { EngineOutput, EngineOutputSource, OutputRead } from "./engine-output.js";
export {
  type EngineLoad,
  type LoadFailure,
  type LoadReading,
  loadOfMetricsText,
  readEngineLoad,
} from "./load.js";
export { DEFAULT_ENGINE_LOGS, type EngineLogsConfig, engineLogsSchema } from "./log-config.js";
export {
  deleteRemovedLogs,
  EngineLogKeeper,
  FileEngineOutput,
  logsDirBytes,
  rotateIfOver,
  shardLogPath,
} from "./log-files.js";
export { processStartTime, startTimeOfStat } from "./process-identity.js";
export {
  EngineSupervisor,
  INHERITED_ENV,
  type ShardLoadReport,
  type SupervisorOptions,
  visibleDevices,
} from "./supervisor.js";
export {
  fill,
  PLACEHOLDERS,
  type Placeholder,
  type TemplateValues,
  unknownPlaceholders,
} from "./template.js";
