/**
 * One configuration file for every llmgw process (`--config-file FILE`, env
 * LLMGW_CONFIG_FILE), YAML or JSON:
 *
 * ```yaml
 * nats: nats://nats-1:4222,nats://nats-2:4222   # shared: any command with --nats
 * stream: LLMGW
 * streamReplicas: 3
 * gateway:                                      # one section per command
 *   listen: 0.0.0.0:8443
 *   heartbeatTimeout: 15000
 * reconciler:
 *   leaseTtlMs: 10000
 * ```
 *
 * Keys are the command's flags in camelCase (`--tls-cert` → `tlsCert`). The
 * file is validated by one zod schema built from the commands' own flags, so
 * a misspelt or mistyped key is named with the flag it stands for.
 * Precedence, lowest first: the file, then the environment, then flags —
 * a value from the file only fills an option nobody set otherwise. Each
 * command then validates the merged values with its own schema, exactly as
 * if they had been given as flags.
 */
import { readFileSync } from "node:fs";
import type { Command, Option } from "commander";
import { parse as parseYaml } from "yaml";
import { z } from "zod";
import { CliError, EXIT } from "./common.js";

/** Keys allowed at the top level: they apply to every command that has the flag. */
export const SHARED_KEYS = ["nats", "stream", "subjectPrefix", "streamReplicas", "logLevel"] as const;

const scalar = z.union([z.string(), z.number(), z.boolean(), z.array(z.union([z.string(), z.number()]))]);

/** Options a file may set for one command: all but help and the config file itself. */
function fileOptions(cmd: Command): Option[] {
  return cmd.options.filter((o) => o.long !== "--help" && o.long !== "--config-file" && !o.negate);
}

/** The schema of the whole file, built from every command's flags. */
export function configFileSchema(program: Command) {
  const sections: Record<string, z.ZodType> = {};
  for (const cmd of program.commands) {
    const keys = Object.fromEntries(fileOptions(cmd).map((o) => [o.attributeName(), scalar.optional()]));
    if (Object.keys(keys).length > 0) sections[cmd.name()] = z.strictObject(keys).optional();
  }
  const shared = Object.fromEntries(SHARED_KEYS.map((k) => [k, scalar.optional()]));
  return z.strictObject({ ...shared, ...sections });
}

function readConfigFile(file: string): unknown {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    throw new CliError(`--config-file: cannot read ${file}: ${(err as Error).message}`);
  }
  try {
    return file.endsWith(".json") ? JSON.parse(text) : (parseYaml(text) ?? {});
  } catch (err) {
    throw new CliError(
      `--config-file: ${file} is not valid ${file.endsWith(".json") ? "JSON" : "YAML"}: ${(err as Error).message}`,
    );
  }
}

/**
 * Fills the options of `cmd` that were not set on the command line or in
 * the environment from the config file. Called before every command runs.
 */
export function applyConfigFile(program: Command, cmd: Command, file: string | undefined): void {
  if (!file) return;
  const parsed = configFileSchema(program).safeParse(readConfigFile(file));
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => {
      const path = i.path.join(".");
      if (i.code === "unrecognized_keys") {
        const where = path ? `${path}.` : "";
        return `${file}: unknown field ${i.keys.map((k) => where + k).join(", ")} (fields are the command's flags in camelCase, e.g. gateway.tlsCert for llmgw gateway --tls-cert)`;
      }
      return `${file}: ${path}: expected a string, a number, a boolean or a list`;
    });
    throw new CliError(lines.join("\n"), EXIT.usage);
  }
  const values = parsed.data as Record<string, unknown>;
  const section = (values[cmd.name()] ?? {}) as Record<string, unknown>;
  for (const opt of fileOptions(cmd)) {
    const key = opt.attributeName();
    const value = key in section ? section[key] : values[key];
    if (value === undefined) continue;
    const source = cmd.getOptionValueSource(key);
    if (source === "cli" || source === "env") continue;
    cmd.setOptionValueWithSource(
      key,
      toOptionValue(opt, value, `${key in section ? `${cmd.name()}.` : ""}${key}`, file),
      "config",
    );
  }
}

function toOptionValue(opt: Option, value: unknown, field: string, file: string): unknown {
  const takesArg = opt.required || opt.optional;
  if (!takesArg) {
    if (typeof value !== "boolean")
      throw new CliError(`${file}: ${field}: expected true or false (it stands for ${opt.long})`);
    return value;
  }
  const text = Array.isArray(value) ? value.join(",") : String(value);
  if (opt.argChoices && !opt.argChoices.includes(text)) {
    throw new CliError(
      `${file}: ${field}: expected one of ${opt.argChoices.join(", ")} (it stands for ${opt.long}), got ${JSON.stringify(text)}`,
    );
  }
  if (!opt.parseArg) return text;
  try {
    return opt.parseArg(text, undefined);
  } catch (err) {
    throw new CliError(`${file}: ${field}: ${(err as Error).message} (it stands for ${opt.long})`);
  }
}
