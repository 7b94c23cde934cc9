/**
 * The routing table. Runs last, on the state this pass's own decisions
 * leave (a drain started, a replica failed or removed, shards that now all
 * run), and restates the table of every model whose ready replicas differ
 * from the table the log records. These units are never cut by the pass
 * limit: a replica whose drain starts in a pass leaves the table in that
 * same pass, before any gateway relays its DrainShard.
 */
import type { EndpointEntry } from "../../projections/index.js";
import { routingTable, sameEndpoints } from "../../projections/index.js";
import { decision } from "./messages.js";
import type { Pass } from "./pass.js";

export function publishEndpoints(pass: Pass): void {
  const want = routingTable(pass.work);
  const have = pass.work.replicas.endpoints;
  const models = [...new Set([...Object.keys(want), ...Object.keys(have)])].sort();
  for (const model of models) {
    const next = want[model] ?? [];
    const prev = have[model] ?? [];
    if (sameEndpoints(prev, next)) continue;
    pass.addAlways({
      decisions: [
        decision(explain(model, prev, next), {
          case: "endpointsChanged",
          value: { model, endpoints: next },
        }),
      ],
      commands: [],
    });
  }
}

function explain(model: string, prev: readonly EndpointEntry[], next: readonly EndpointEntry[]): string {
  const was = new Map(prev.map((e) => [e.replicaId, e.url]));
  const now = new Map(next.map((e) => [e.replicaId, e.url]));
  const parts: string[] = [];
  for (const e of next) {
    if (!was.has(e.replicaId)) parts.push(`${e.replicaId} ready at ${e.url}`);
    else if (was.get(e.replicaId) !== e.url) parts.push(`${e.replicaId} moved to ${e.url}`);
  }
  for (const e of prev) if (!now.has(e.replicaId)) parts.push(`${e.replicaId} no longer ready`);
  return `routing table of ${model}: ${parts.join(", ")}; ${next.length} endpoint(s)`;
}
