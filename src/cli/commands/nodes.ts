/** `llmgw nodes`: the fleet's nodes from the operator API. */
import type { Command } from "commander";
import type { NodeView } from "../../operator/index.js";
import { type ApiFlags, call, clientFor, formatTable, printJson, withApiOptions } from "./operator-common.js";

export function registerNodes(program: Command): void {
  withApiOptions(
    program
      .command("nodes")
      .description("list nodes: liveness, GPUs in use, cordon, faulty or cordoned GPUs"),
  ).action(async (flags: ApiFlags) => {
    const client = clientFor(flags);
    const { body } = await call(() => client.get<{ seq: number; nodes: NodeView[] }>("/v1/nodes"));
    if (flags.json) return printJson(body);
    process.stdout.write(`${nodesTable(body.nodes)}\n`);
  });
}

export function cordonCell(n: NodeView): string {
  return n.draining ? "draining" : n.cordoned ? "cordoned" : "";
}

export function nodesTable(nodes: NodeView[]): string {
  return formatTable(
    ["NODE", "ADDRESS", "LIVENESS", "GPUS", "CORDON", "REPLICAS", "REASON", "GPU ISSUES"],
    nodes.map((n) => [
      n.nodeId,
      n.advertiseAddress,
      n.liveness,
      `${n.gpusUsed}/${n.gpusTotal}`,
      cordonCell(n),
      String(n.replicaIds.length),
      n.cordonReason,
      gpuIssuesCell(n),
    ]),
  );
}

/** GPUs out of placement and why, e.g. "gpu3 xid, gpu5 cordoned"; node-level problems first. */
export function gpuIssuesCell(n: NodeView): string {
  const out = n.nodeProblems.length > 0 ? ["node problem"] : [];
  for (const g of n.gpus) {
    const why = [
      ...(g.problems.length > 0 ? ["problem"] : []),
      ...new Set(g.faults.map((f) => f.kind)),
      ...(g.cordoned ? ["cordoned"] : []),
    ];
    if (why.length > 0) out.push(`gpu${g.index} ${why.join("+")}`);
  }
  return out.join(", ");
}
