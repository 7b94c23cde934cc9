/** `llmgw gpu clear <node> <gpu|node>`: an operator says a GPU's (or the node's) problems are dealt with. */
import type { Command } from "commander";
import { invalidNodeIdReason } from "../../ids/index.js";
import { CliError } from "../common.js";
import { type ApiFlags, call, clientFor, printJson, withApiOptions } from "./operator-common.js";

/** A GPU index as typed: a whole number ≥ 0, or a CLI error naming `field`. */
export function gpuIndexArg(raw: string, field: string): number {
  if (!/^\d{1,9}$/.test(raw))
    throw new CliError(`${field} ${JSON.stringify(raw)} must be a whole number ≥ 0`);
  return Number(raw);
}

export function registerGpu(program: Command): void {
  const gpu = program.command("gpu").description("per-GPU operator actions (see also cordon/uncordon --gpu)");
  withApiOptions(
    gpu
      .command("clear")
      .description(
        "clear the problems of one GPU (or, with `node`, the node-level problems): it takes work again unless cordoned",
      )
      .argument("<node>", "node id")
      .argument("<gpu>", "GPU index, or `node` for the problems not tied to a GPU")
      .option("--reason <text>", "why, recorded in the log"),
  ).action(async (node: string, which: string, flags: ApiFlags & { reason?: string }) => {
    const why = invalidNodeIdReason(node);
    if (why) throw new CliError(`invalid <node>: ${why}`);
    const index = which === "node" ? undefined : gpuIndexArg(which, "gpu");
    const client = clientFor(flags);
    const body = flags.reason === undefined ? {} : { reason: flags.reason };
    const { body: res } = await call(() =>
      client.send((api) =>
        index === undefined
          ? api.POST("/v1/nodes/{id}/problems/clear", { params: { path: { id: node } }, body })
          : api.POST("/v1/nodes/{id}/gpus/{index}/clear", { params: { path: { id: node, index } }, body }),
      ),
    );
    if (flags.json) return printJson(res);
    const what = which === "node" ? "node-level problems" : `GPU ${which} problems`;
    process.stdout.write(`${node} ${what} cleared (log sequence ${res.seq})\n`);
  });
}
