/**
 * What the operator commands share: how they reach the API (--api, --token),
 * --json for tools, tables for people, and one-line errors with the exit
 * code that says whose problem it is.
 */
import { userInfo } from "node:os";
import { type Command, Option } from "commander";
import { ApiCallError, ApiClient } from "../../operator/index.js";
import { CliError, EXIT } from "../common.js";

export const DEFAULT_API_URL = "http://127.0.0.1:8080";

export interface ApiFlags {
  api: string;
  token?: string;
  json?: boolean;
}

/** Adds --api, --token and --json. */
export function withApiOptions(cmd: Command): Command {
  return cmd
    .addOption(
      new Option("--api <url>", "operator API base URL").env("LLMGW_API_URL").default(DEFAULT_API_URL),
    )
    .addOption(new Option("--token <token>", "API bearer token").env("LLMGW_API_TOKEN"))
    .option("--json", "print JSON for tools instead of a table");
}

export function clientFor(flags: ApiFlags): ApiClient {
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
