/**
 * `llmgw describe node ID` / `llmgw describe replica ID`: one object in
 * full, for people (fields, then its GPUs or shards as tables), or as the
 * API answers it with -o json|yaml.
 */
import { type Command, Option } from "commander";
import { invalidNodeIdReason } from "../../ids/index.js";
import type { NodeView, ReplicaView } from "../../operator/index.js";
import { CliError } from "../common.js";
import { gpuIssuesCell } from "./nodes.js";
import {
  type ApiFlags,
  call,
  clientFor,
  formatTable,
  printStructured,
  withApiOptions,
} from "./operator-common.js";

type DescribeFlags = Omit<ApiFlags, "output"> & { output: "text" | "json" | "yaml" };

/** `Key:  value` lines, aligned; empty values print as "-". */
function fields(rows: Array<[string, string]>): string {
  const width = Math.max(...rows.map(([k]) => k.length)) + 1;
  return rows.map(([k, v]) => `${`${k}:`.padEnd(width)}  ${v === "" ? "-" : v}`).join("\n");
}

const time = (ms: number | null) => (ms === null || ms === 0 ? "" : new Date(ms).toISOString());

export function describeNode(n: NodeView): string {
  const gpus = formatTable(
    ["GPU", "PRODUCT", "MEMORY USED/TOTAL (MiB)", "CORDONED", "ISSUES", "SHARDS"],
    n.gpus.map((g) => [
      String(g.index),
      g.product,
      `${g.memoryUsedMb}/${g.memoryTotalMb}`,
      g.cordoned ? `yes${g.cordonReason ? ` (${g.cordonReason})` : ""}` : "no",
      [...g.problems, ...g.faults.map((f) => `${f.kind}: ${f.message}`)].join("; "),
      g.shards.map((s) => `${s.shardId} (${s.model}, ${s.state})`).join(", "),
    ]),
  );
  const waiting = n.waitingOn.map((w) => `  ${w.replicaId} (${w.model}): ${JSON.stringify(w)}`);
  return [
    fields([
      ["Node", n.nodeId],
      ["Liveness", n.liveness],
      ["Address", n.advertiseAddress],
      ["Agent", n.agentVersion],
      [
        "Session",
        n.session
          ? `${n.session.sessionId} via ${n.session.gatewayId} (log sequence ${n.session.openedSeq})`
          : "",
      ],
      ["Identity", n.session?.identity ?? ""],
      ["Disconnected since", time(n.disconnectedSinceMs)],
      ["Last close", n.lastCloseReason],
      ["Cordoned", n.cordoned ? `yes${n.cordonReason ? `: ${n.cordonReason}` : ""}` : "no"],
      ["Draining", n.draining ? "yes" : "no"],
      [
        "Labels",
        Object.entries(n.labels)
          .map(([k, v]) => `${k}=${v}`)
          .join(", "),
      ],
      ["GPUs", `${n.gpusUsed}/${n.gpusTotal} in use`],
      ["GPU issues", gpuIssuesCell(n)],
      ["Node problems", n.nodeProblems.join("; ")],
      ["Replicas", n.replicaIds.join(", ")],
      ["Last change", `log sequence ${n.lastChangeSeq}`],
    ]),
    "",
    gpus,
    ...(waiting.length > 0 ? ["", "Moving work off it waits on:", ...waiting] : []),
  ].join("\n");
}

export function describeReplica(r: ReplicaView): string {
  const shards = formatTable(
    ["SHARD", "RANK", "NODE", "SESSION", "GPUS", "STATE", "DESIRED", "LAST ERROR"],
    r.shards.map((s) => [
      s.shardId,
      String(s.rank),
      s.nodeId,
      s.sessionId,
      s.gpuIndices.join(","),
      String(s.state),
      String(s.desired),
      s.lastError,
    ]),
  );
  return [
    fields([
      ["Replica", r.replicaId],
      ["Model", r.model],
      ["Profile", r.profile],
      ["Revision", r.revision],
      ["Phase", r.phase],
      ["Ready", r.ready ? "yes" : "no"],
      ["Nodes", r.nodeIds.join(", ")],
      ["Created", `log sequence ${r.createdSeq}${r.createdMs ? ` (${time(r.createdMs)})` : ""}`],
      ["Replaces", r.replaces],
      ["Replaced by", r.replacedBy],
      ["Pending", r.phase === "pending" ? r.pendingReason : ""],
      ["Draining", r.drainReason],
      ["Disruption blocked", r.disruptionBlocked],
      ["Restarts", String(r.restarts)],
      ["Back off until", time(r.backoffUntilMs)],
      [
        "Last failure",
        r.lastFailure
          ? `${r.lastFailure.reason} on ${r.lastFailure.nodeId || "?"}: ${r.lastFailure.message}`
          : "",
      ],
      ["Last change", `log sequence ${r.lastChangeSeq}`],
    ]),
    "",
    shards,
  ].join("\n");
}

export function registerDescribe(program: Command): void {
  const describe = program
    .command("describe")
    .description("one node or replica in full: its fields, then its GPUs or shards (llmgw explain says why)");
  const common = (cmd: Command) =>
    withApiOptions(cmd).addOption(
      new Option("-o, --output <format>", "text, json or yaml")
        .choices(["text", "json", "yaml"])
        .default("text"),
    );
  common(
    describe.command("node <id>").description("a node: liveness, session, cordon, GPUs and what holds them"),
  ).action(async (id: string, flags: DescribeFlags) => {
    const bad = invalidNodeIdReason(id);
    if (bad) throw new CliError(`invalid <id>: ${bad}`);
    const client = clientFor(flags);
    const { body } = await call(() =>
      client.send((api) => api.GET("/v1/nodes/{id}", { params: { path: { id } } })),
    );
    if (printStructured(flags.json ? "json" : flags.output === "text" ? "table" : flags.output, body)) return;
    process.stdout.write(`${describeNode(body.node)}\n`);
  });
  common(
    describe.command("replica <id>").description("a replica: phase, placement, shards, failures"),
  ).action(async (id: string, flags: DescribeFlags) => {
    const client = clientFor(flags);
    const { body } = await call(() =>
      client.send((api) => api.GET("/v1/replicas/{id}", { params: { path: { id } } })),
    );
    if (printStructured(flags.json ? "json" : flags.output === "text" ? "table" : flags.output, body)) return;
    process.stdout.write(`${describeReplica(body.replica)}\n`);
  });
}
