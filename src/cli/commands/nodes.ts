/** `llmgw nodes`: the fleet's nodes from the operator API, once or watched. */
import type { Command } from "commander";
import type { ApiSchemas, NodeView } from "../../operator/index.js";
import { type ListPrinter, showList } from "./list-output.js";
import { type ApiFlags, formatTable, withApiOptions, withOutputOption } from "./operator-common.js";

type NodesAnswer = ApiSchemas["Nodes"];

const printer: ListPrinter<NodesAnswer> = {
  table: (body, wide) => nodesTable(body.nodes, wide),
};

export function registerNodes(program: Command): void {
  withOutputOption(
    withApiOptions(
      program
        .command("nodes")
        .description(
          "list nodes: liveness, GPUs in use, cordon, faulty or cordoned GPUs (-o wide adds agent, session and labels; --watch prints again on every change)",
        ),
    ),
  )
    .option("-w, --watch", "print the list again whenever it changes (follows GET /v1/stream), until Ctrl-C")
    .action((flags: ApiFlags & { watch?: boolean }) =>
      showList(
        flags,
        (c) => c.send((api) => api.GET("/v1/nodes")),
        printer,
        (b) => b.nodes,
      ),
    );
}

export function cordonCell(n: NodeView): string {
  return n.draining ? "draining" : n.cordoned ? "cordoned" : "";
}

export function nodesTable(nodes: NodeView[], wide = false): string {
  const header = ["NODE", "ADDRESS", "LIVENESS", "GPUS", "CORDON", "REPLICAS", "REASON", "GPU ISSUES"];
  return formatTable(
    wide ? [...header, "AGENT", "SESSION", "GATEWAY", "LABELS"] : header,
    nodes.map((n) => {
      const row = [
        n.nodeId,
        n.advertiseAddress,
        n.liveness,
        `${n.gpusUsed}/${n.gpusTotal}`,
        cordonCell(n),
        String(n.replicaIds.length),
        n.cordonReason,
        gpuIssuesCell(n),
      ];
      if (!wide) return row;
      return [
        ...row,
        n.agentVersion,
        n.session?.sessionId ?? "",
        n.session?.gatewayId ?? "",
        Object.entries(n.labels)
          .map(([k, v]) => `${k}=${v}`)
          .join(","),
      ];
    }),
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
