// What a catalog may ask an engine to run with: the one deny list of environment names, the size limits, the allow-list check. Pure.
export {
  argProblem,
  type EngineAllowLists,
  envNameProblem,
  type LaunchIssue,
  launchIssues,
  totalChars,
} from "./check.js";
export { DENIED_ENV_PATTERNS, type DeniedEnv, deniedEnv, matchesEnvPattern } from "./env-deny-list.js";
export { ENGINE_LIMITS, ENV_NAME_PATTERN } from "./limits.js";
