/**
 * The one check of the engine arguments and environment a start asks for:
 * the deny list, the size limits and, when the agent's engine config sets
 * them, its allow lists. Pure: the catalog schema and the agent both call it.
 */
import { deniedEnv, matchesEnvPattern } from "./env-deny-list.js";
import { ENGINE_LIMITS, ENV_NAME_PATTERN } from "./limits.js";

/** An engine's own allow lists (the agent's config); an absent list allows everything the deny list does. */
export interface EngineAllowLists {
  /** Names (or `PREFIX_*` patterns) the catalog may set; the deny list applies regardless. */
  allowedEnv?: readonly string[] | undefined;
  /** Every catalog argument must start with one of these (write `--flag=value`). */
  allowedArgPrefixes?: readonly string[] | undefined;
}

/** One refused part of a start: where (`engineEnv.LD_PRELOAD`, `engineArgs[3]`) and why. */
export interface LaunchIssue {
  path: string;
  message: string;
}

/** Why an environment variable name may not come from a catalog, or undefined. */
export function envNameProblem(name: string, allow?: EngineAllowLists): string | undefined {
  if (!ENV_NAME_PATTERN.test(name))
    return "must be an environment variable name: a letter or '_', then letters, digits or '_' (at most 128)";
  const denied = deniedEnv(name);
  if (denied)
    return `may not be set by the catalog (deny list ${denied.pattern}: ${denied.why}); set it in the agent's engine config if the node needs it`;
  if (allow?.allowedEnv && !matchesEnvPattern(name, allow.allowedEnv))
    return `is not in this engine's allowedEnv (${allow.allowedEnv.join(", ") || "empty"})`;
  return undefined;
}

/** Why an argument may not come from a catalog, or undefined. */
export function argProblem(arg: string, allow?: EngineAllowLists): string | undefined {
  if (arg.length > ENGINE_LIMITS.maxArgChars) return `is longer than ${ENGINE_LIMITS.maxArgChars} characters`;
  if (arg.includes("\u0000")) return "contains a NUL character";
  const prefixes = allow?.allowedArgPrefixes;
  if (prefixes && !prefixes.some((p) => arg.startsWith(p)))
    return `does not start with one of this engine's allowedArgPrefixes (${prefixes.join(", ") || "empty"})`;
  return undefined;
}

/** Everything wrong with a start's engine arguments and environment; empty when it may run. */
export function launchIssues(
  engineArgs: readonly string[],
  engineEnv: Readonly<Record<string, string>>,
  allow?: EngineAllowLists,
): LaunchIssue[] {
  const issues: LaunchIssue[] = [];
  if (engineArgs.length > ENGINE_LIMITS.maxArgs)
    issues.push({
      path: "engineArgs",
      message: `has ${engineArgs.length} arguments, more than ${ENGINE_LIMITS.maxArgs}`,
    });
  engineArgs.forEach((a, i) => {
    const why = argProblem(a, allow);
    if (why) issues.push({ path: `engineArgs[${i}]`, message: why });
  });
  const env = Object.entries(engineEnv);
  if (env.length > ENGINE_LIMITS.maxEnv)
    issues.push({
      path: "engineEnv",
      message: `has ${env.length} variables, more than ${ENGINE_LIMITS.maxEnv}`,
    });
  for (const [name, value] of env) {
    const path = `engineEnv.${ENV_NAME_PATTERN.test(name) ? name : JSON.stringify(name)}`;
    const why = envNameProblem(name, allow);
    if (why) issues.push({ path, message: why });
    if (value.length > ENGINE_LIMITS.maxEnvValueChars)
      issues.push({ path, message: `its value is longer than ${ENGINE_LIMITS.maxEnvValueChars} characters` });
    else if (value.includes("\u0000")) issues.push({ path, message: "its value contains a NUL character" });
  }
  const total = totalChars(engineArgs, engineEnv);
  if (total > ENGINE_LIMITS.maxTotalChars)
    issues.push({
      path: "engineArgs",
      message: `arguments and environment are ${total} characters together, more than ${ENGINE_LIMITS.maxTotalChars}`,
    });
  return issues;
}

/** Characters of all arguments and environment names and values. */
export function totalChars(
  engineArgs: readonly string[],
  engineEnv: Readonly<Record<string, string>>,
): number {
  let n = 0;
  for (const a of engineArgs) n += a.length;
  for (const [k, v] of Object.entries(engineEnv)) n += k.length + v.length;
  return n;
}
