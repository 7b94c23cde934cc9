/** Engine supervision: templated commands, detached process groups, readiness, adoption across agent restarts. */
export { type EngineConfig, type EnginesConfig, engineSchema, enginesSchema } from "./config.js";
export { processStartTime, startTimeOfStat } from "./process-identity.js";
export { EngineSupervisor, type SupervisorOptions } from "./supervisor.js";
export {
  fill,
  PLACEHOLDERS,
  type Placeholder,
  type TemplateValues,
  unknownPlaceholders,
} from "./template.js";
