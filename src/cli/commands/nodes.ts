/** `llmgw nodes`: the fleet's nodes from the operator API. */
import type { Command } from "commander";
import type { NodeView } from "../../operator/index.js";
import { type ApiFlags, call, clientFor, formatTable, printJson, withApiOptions } from "./operator-common.js";

export function registerNodes(program: Command): void {
  withApiOptions(program.command("nodes").description("list nodes: liveness, GPUs in use, cordon")).action(
    async (flags: ApiFlags) => {
      const client = clientFor(flags);
      const { body } = await call(() => client.get<{ seq: number; nodes: NodeView[] }>("/v1/nodes"));
      if (flags.json) return printJson(body);
      process.stdout.write(`${nodesTable(body.nodes)}\n`);
    },
  );
}

export function cordonCell(n: NodeView): string {
  return n.draining ? "draining" : n.cordoned ? "cordoned" : "";
}

export function nodesTable(nodes: NodeView[]): string {
  return formatTable(
    ["NODE", "LIVENESS", "GPUS", "CORDON", "REPLICAS", "REASON"],
    nodes.map((n) => [
      n.nodeId,
      n.liveness,
      `${n.gpusUsed}/${n.gpusTotal}`,
      cordonCell(n),
      String(n.replicaIds.length),
      n.cordonReason,
    ]),
  );
}
