/** `llmgw cordon|uncordon|drain <node>` (cordon/uncordon also `--gpu N`): operator intent, written to the log by the API. */
import type { Command } from "commander";
import { invalidNodeIdReason } from "../../log/index.js";
import type { NodeView } from "../../operator/index.js";
import { CliError } from "../common.js";
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
  withApiOptions(cmd).action(async (node: string, flags: ApiFlags & { reason?: string; gpu?: string }) => {
    const why = invalidNodeIdReason(node);
    if (why) throw new CliError(`invalid <node>: ${why}`);
    const gpu = flags.gpu === undefined ? undefined : gpuIndexArg(flags.gpu, "--gpu");
    const path =
      gpu === undefined ? `/v1/nodes/${node}/${action}` : `/v1/nodes/${node}/gpus/${gpu}/${action}`;
    const client = clientFor(flags);
    const body = JSON.stringify(flags.reason === undefined ? {} : { reason: flags.reason });
    const { body: res } = await call(() =>
      client.request<{ seq: number; node: NodeView }>("POST", path, { body }),
    );
    if (flags.json) return printJson(res);
    const done = { cordon: "cordoned", uncordon: "uncordoned", drain: "draining" }[action];
    process.stdout.write(
      `${node}${gpu === undefined ? "" : ` GPU ${gpu}`} ${done} (log sequence ${res.seq})\n`,
    );
  });
}
