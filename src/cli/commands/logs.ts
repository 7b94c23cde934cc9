/**
 * `llmgw logs <replica|shard>`: an engine's output through the control
 * plane (GET /v1/logs/:id), no shell on the node: the last lines, then with
 * --follow what the engine prints next, until Ctrl-C.
 */
import { type Command, Option } from "commander";
import { MAX_TAIL_LINES } from "../../engine-logs/index.js";
import { ApiCallError } from "../../operator/index.js";
import { CliError, EXIT } from "../common.js";
import { apiAccessOptions, clientFor } from "./operator-common.js";

interface LogsFlags {
  api: string;
  token?: string;
  follow?: boolean;
  tail?: number;
}

export function registerLogs(program: Command): void {
  const cmd = program
    .command("logs")
    .argument(
      "<replica|shard>",
      "a replica id (its first shard) or a shard id, as `llmgw replicas -o wide` lists them",
    )
    .description(
      "print an engine's output, read from its node's agent through the gateway that holds the node's stream (no SSH); --follow keeps printing what it prints next, until Ctrl-C. Needs a token with the operator role",
    )
    .option("-f, --follow", "keep printing the engine's output as it comes")
    .addOption(
      new Option(
        "--tail <n>",
        `print the last N lines first (0: none; default and most: ${MAX_TAIL_LINES}, at most 1 MiB)`,
      ).argParser((v) => {
        const n = Number(v);
        if (!/^\d+$/.test(v) || n > MAX_TAIL_LINES)
          throw new CliError(
            `--tail must be a whole number from 0 to ${MAX_TAIL_LINES}, got ${JSON.stringify(v)}`,
          );
        return n;
      }),
    );
  for (const o of apiAccessOptions()) cmd.addOption(o);
  cmd.action(async (target: string, flags: LogsFlags) => {
    const client = clientFor(flags);
    const stop = new AbortController();
    const onSignal = () => stop.abort();
    process.once("SIGINT", onSignal);
    process.once("SIGTERM", onSignal);
    try {
      const query = {
        follow: flags.follow === true,
        ...(flags.tail !== undefined ? { tail: flags.tail } : {}),
      };
      for await (const e of client.followEngineLogs(target, query, stop.signal)) {
        if (e.kind === "output") {
          if (!process.stdout.write(e.text))
            await new Promise((resolve) => process.stdout.once("drain", resolve));
          continue;
        }
        if (e.end === "done" || e.end === "cancelled") return;
        throw new CliError(`the engine's output ended early (${e.end}): ${e.error}`, EXIT.failure);
      }
      if (!stop.signal.aborted)
        throw new CliError("the API ended the stream without saying why", EXIT.failure);
    } catch (err) {
      if (!(err instanceof ApiCallError)) throw err;
      throw new CliError(err.message, err.status === 400 || err.status === 404 ? EXIT.usage : EXIT.failure);
    } finally {
      process.off("SIGINT", onSignal);
      process.off("SIGTERM", onSignal);
    }
  });
}
