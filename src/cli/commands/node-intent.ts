/**
 * `llmgw cordon|uncordon|drain <node>` (cordon/uncordon also `--gpu N`):
 * operator intent, written to the log by the API. `drain` also prints what
 * the drain waits on (`--status` only that, `--wait` until it is done).
 */
import type { Command } from "commander";
import { invalidNodeIdReason } from "../../ids/index.js";
import type { TypedApi } from "../../operator/index.js";
import { CliError, EXIT } from "../common.js";
import { drainDone, drainWaitLines, followDrain } from "./drain-status.js";
import { gpuIndexArg } from "./gpu.js";
import { type ApiFlags, call, clientFor, printJson, withApiOptions } from "./operator-common.js";

const SUMMARY = {
  cordon: "keep new work off a node",
  uncordon: "let a node take work again (also ends a drain)",
  drain: "move everything off a node, make-before-break; it stays cordoned",
} as const;

export function registerNodeIntent(program: Command, action: keyof typeof SUMMARY): void {
  const cmd = program
    .command(action)
    .description(SUMMARY[action])
    .argument("<node>", "node id, a DNS name (e.g. gpu-017.rack4.dc1.example.com)");
  if (action !== "uncordon") cmd.option("--reason <text>", "why, recorded in the log");
  if (action !== "drain") cmd.option("--gpu <index>", `${action} one GPU of the node instead of the node`);
  if (action === "drain") {
    cmd
      .option("--status", "request nothing: print whether the node drains and what its drain waits on")
      .option(
        "--wait",
        "after the request, print what the drain waits on whenever it changes, until the node is empty",
      )
      .addHelpText(
        "after",
        "\nThe drain waits for each replica's replacement to be ready; a model with a disruption\nbudget (minAvailable in the catalog) may let a replica go earlier, or keep it serving\nwhile taking it would leave fewer ready replicas than the budget; the list says which.",
      );
  }
  type Flags = ApiFlags & { reason?: string; gpu?: string; status?: boolean; wait?: boolean };
  withApiOptions(cmd).action(async (node: string, flags: Flags) => {
    const why = invalidNodeIdReason(node);
    if (why) throw new CliError(`invalid <node>: ${why}`);
    if (action === "drain" && (flags.status || flags.wait)) return drainStatus(node, flags);
    const gpu = flags.gpu === undefined ? undefined : gpuIndexArg(flags.gpu, "--gpu");
    const client = clientFor(flags);
    const body = flags.reason === undefined ? {} : { reason: flags.reason };
    const { body: res } = await call(() => client.send(intentCall(action, node, gpu, body)));
    if (flags.json) return printJson(res);
    const done = { cordon: "cordoned", uncordon: "uncordoned", drain: "draining" }[action];
    process.stdout.write(
      `${node}${gpu === undefined ? "" : ` GPU ${gpu}`} ${done} (log sequence ${res.seq})\n`,
    );
    if (action === "drain") process.stdout.write(drainWaitLines(res.node));
  });
}

/** The API call of an intent on a node, or on one of its GPUs (cordon and uncordon only). */
function intentCall(
  action: keyof typeof SUMMARY,
  id: string,
  gpu: number | undefined,
  body: { reason?: string },
) {
  return (api: TypedApi) => {
    switch (action) {
      case "cordon":
        return gpu === undefined
          ? api.POST("/v1/nodes/{id}/cordon", { params: { path: { id } }, body })
          : api.POST("/v1/nodes/{id}/gpus/{index}/cordon", { params: { path: { id, index: gpu } }, body });
      case "uncordon":
        return gpu === undefined
          ? api.POST("/v1/nodes/{id}/uncordon", { params: { path: { id } }, body })
          : api.POST("/v1/nodes/{id}/gpus/{index}/uncordon", { params: { path: { id, index: gpu } }, body });
      // drain takes no --gpu.
      case "drain":
        return api.POST("/v1/nodes/{id}/drain", { params: { path: { id } }, body });
      default: {
        const never: never = action;
        throw new Error(`unknown intent ${String(never)}`);
      }
    }
  };
}

/** `drain --status` (no request) and `drain --wait` (request, then follow). */
async function drainStatus(
  node: string,
  flags: ApiFlags & { reason?: string; status?: boolean; wait?: boolean },
): Promise<void> {
  const client = clientFor(flags);
  if (flags.status && flags.wait) throw new CliError("--status and --wait exclude each other", EXIT.usage);
  if (flags.status) {
    const { body } = await call(() =>
      client.send((api) => api.GET("/v1/nodes/{id}", { params: { path: { id: node } } })),
    );
    if (flags.json) return printJson(body);
    const state = body.node.draining
      ? "draining"
      : body.node.cordoned
        ? "cordoned, not draining"
        : "not draining";
    process.stdout.write(`${node} ${state} (log sequence ${body.seq})\n`);
    if (body.node.draining) process.stdout.write(drainWaitLines(body.node));
    return;
  }
  const reqBody = flags.reason === undefined ? {} : { reason: flags.reason };
  const { body: res } = await call(() => client.send(intentCall("drain", node, undefined, reqBody)));
  if (!flags.json) process.stdout.write(`${node} draining (log sequence ${res.seq})\n`);
  if (drainDone(res.node)) return;
  const stop = new AbortController();
  process.once("SIGINT", () => stop.abort());
  const last = await followDrain(client, node, flags.json === true, stop.signal);
  if (last && !flags.json) process.stdout.write(`${node} drained\n`);
}
