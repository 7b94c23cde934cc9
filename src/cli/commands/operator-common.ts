/**
 * What the operator commands share: how they reach the API (--api, --token),
 * --json for tools, tables for people, and one-line errors with the exit
 * code that says whose problem it is.
 */
import { userInfo } from "node:os";
import { type Command, Option } from "commander";
import { stringify as stringifyYaml } from "yaml";
import { ApiCallError, ApiClient } from "../../operator/index.js";
import { CliError, EXIT } from "../common.js";

export const DEFAULT_API_URL = "http://127.0.0.1:8080";

export interface ApiFlags {
  api: string;
  token?: string;
  json?: boolean;
  /** `-o`: only on the list commands (withOutputOption). */
  output?: OutputFormat;
}

/**
 * `--api` and `--token`: a flag wins over its environment variable, which
 * wins over the current context (`llmgw config use-context`, applied by
 * applyContext before the command runs).
 */
export function apiAccessOptions(): Option[] {
  return [
    new Option("--api <url>", "operator API base URL (else the current context's, see llmgw config)")
      .env("LLMGW_API_URL")
      .default(DEFAULT_API_URL),
    new Option("--token <token>", "API bearer token (else the current context's token file)").env(
      "LLMGW_API_TOKEN",
    ),
  ];
}

/** Adds --api, --token and --json. */
export function withApiOptions(cmd: Command): Command {
  for (const o of apiAccessOptions()) cmd.addOption(o);
  return cmd.option("--json", "print JSON for tools instead of a table (the same as -o json)");
}

export const OUTPUT_FORMATS = ["table", "wide", "json", "yaml"] as const;
export type OutputFormat = (typeof OUTPUT_FORMATS)[number];

/** `-o, --output table|wide|json|yaml` of a list command (`--json` stays, as `-o json`). */
export function withOutputOption(cmd: Command): Command {
  return cmd.addOption(
    new Option(
      "-o, --output <format>",
      "table, wide (more columns), json or yaml (the API's answer as it is)",
    )
      .choices(OUTPUT_FORMATS)
      .default("table"),
  );
}

/** The format asked for: `--json` is `-o json`. */
export function outputOf(flags: { json?: boolean; output?: OutputFormat }): OutputFormat {
  return flags.json ? "json" : (flags.output ?? "table");
}

/** Prints a body as JSON or YAML; false for table and wide (the caller prints its table). */
export function printStructured(format: OutputFormat, body: unknown): boolean {
  switch (format) {
    case "json":
      printJson(body);
      return true;
    case "yaml":
      process.stdout.write(stringifyYaml(body));
      return true;
    case "table":
    case "wide":
      return false;
    default: {
      const never: never = format;
      throw new Error(`unknown output format ${String(never)}`);
    }
  }
}

export function clientFor(flags: Pick<ApiFlags, "api" | "token">): ApiClient {
  let url: URL;
  try {
    url = new URL(flags.api);
  } catch {
    throw new CliError(`--api must be a URL like ${DEFAULT_API_URL}, got ${JSON.stringify(flags.api)}`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new CliError(`--api must be an http:// or https:// URL, got ${JSON.stringify(flags.api)}`);
  }
  // No operator name is sent: the API records the token's name.
  return new ApiClient({ url: url.toString(), ...(flags.token ? { token: flags.token } : {}) });
}

/** The local user name, for the record of who did something ("cli" when there is none). */
export function safeUser(): string {
  try {
    return userInfo().username;
  } catch {
    return "cli";
  }
}

/**
 * Runs an API call; a failure becomes a CliError. The request was wrong
 * (400, 404) → exit 2; the server, the network, auth or a race → exit 1.
 */
export async function call<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (!(err instanceof ApiCallError)) throw err;
    throw new CliError(err.message, err.status === 400 || err.status === 404 ? EXIT.usage : EXIT.failure);
  }
}

export function printJson(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}

/** Left-aligned columns separated by two spaces; empty cells print as "-". */
export function formatTable(header: string[], rows: string[][]): string {
  const cells = [header, ...rows.map((r) => r.map((c) => (c === "" ? "-" : c)))];
  const widths = header.map((_, i) => Math.max(...cells.map((r) => (r[i] ?? "").length)));
  return cells
    .map((r) =>
      r
        .map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i] ?? 0)))
        .join("  ")
        .trimEnd(),
    )
    .join("\n");
}
