/**
 * How a command reaches the fleet's data: the operator API (with a token)
 * or, for the commands that read the log, NATS itself. The API's URL and
 * token come from the flags, then the environment, then the current
 * context; the log commands read NATS only when told to (`--nats` on the
 * command line, or LLMGW_NATS_URL with no API URL in the environment).
 */
import type { Command } from "commander";
import { contextsFilePath, contextToken, currentContext } from "./contexts.js";

/** Where a value came from, beyond commander's own sources. */
const FROM_CONTEXT = "context";

/**
 * Before a command that takes --api runs: the current context fills in
 * --api (and then its token) when neither the command line, the
 * environment nor the config file gave one.
 */
export function applyContext(cmd: Command): void {
  if (!cmd.options.some((o) => o.attributeName() === "api")) return;
  const apiSource = cmd.getOptionValueSource("api");
  if (apiSource !== undefined && apiSource !== "default") return;
  const ctx = currentContext(contextsFilePath());
  if (!ctx) return;
  cmd.setOptionValueWithSource("api", ctx.api, FROM_CONTEXT);
  // The context's token goes only to the context's own API, never to a URL given another way.
  const tokenSource = cmd.getOptionValueSource("token");
  if (tokenSource === undefined || tokenSource === "default") {
    const token = contextToken(ctx);
    if (token !== undefined) cmd.setOptionValueWithSource("token", token, FROM_CONTEXT);
  }
}

export type ReadVia = "nats" | "api";

/**
 * Whether a log-reading command reads NATS or asks the API. `--nats` on
 * the command line reads NATS; `--api` on the command line, LLMGW_API_URL
 * or an API URL in the config file asks the API; LLMGW_NATS_URL (or a nats
 * URL in the config file) reads NATS; otherwise the current context's API
 * or the default one.
 */
export function readVia(cmd: Command): ReadVia {
  const nats = cmd.getOptionValueSource("nats");
  const api = cmd.getOptionValueSource("api");
  if (nats === "cli") return "nats";
  if (api === "cli" || api === "env" || api === "config") return "api";
  if (nats === "env" || nats === "config") return "nats";
  return "api";
}
