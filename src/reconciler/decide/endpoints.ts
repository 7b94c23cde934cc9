/**
 * The routing table. Runs last, on the state this pass's own decisions
 * leave (a drain started, a replica failed or removed, shards that now all
 * run), and restates the table of every model whose ready replicas differ
 * from the table the log records. These units are never cut by the pass
 * limit: a replica whose drain starts in a pass leaves the table in that
 * same pass, before any gateway relays its DrainShard.
 */

import type { DeepReadonly } from "../../projections/index.js";
import {
  type EndpointEntry,
  type Group,
  type ReplicaState,
  replicaEndpoint,
  sameEndpoints,
} from "../../projections/index.js";
import { replicaGroups } from "./indexes.js";
import { decision } from "./messages.js";
import type { Pass } from "./pass.js";

/**
 * A recorded table (the array the fold keeps for a model) → the version of
 * its model's replica groups when the routing table was last found equal
 * to it. While neither changed, the model's table is not built again: a
 * pass reads the replicas of the models whose replicas changed, not every
 * ready replica of the fleet. The fold replaces a model's array when its
 * table changes, so an array never stands for two tables.
 */
const verified = new WeakMap<readonly EndpointEntry[], number>();

export function publishEndpoints(pass: Pass): void {
  const have = pass.work.replicas.endpoints;
  const byModel = new Map<string, { version: number; ready: Group[] }>();
  for (const [c, g] of replicaGroups(pass.work)) {
    const m = byModel.get(c.model) ?? { version: 0, ready: [] };
    m.version = Math.max(m.version, g.version);
    if (c.ready && g.size > 0) m.ready.push(g);
    byModel.set(c.model, m);
  }
  const models = [...new Set([...byModel.keys(), ...Object.keys(have)])].sort();
  for (const model of models) {
    const prev = have[model];
    const version = byModel.get(model)?.version ?? 0;
    if (prev !== undefined && verified.get(prev) === version) continue;
    const next = tableOf(pass, byModel.get(model)?.ready ?? []);
    if (sameEndpoints(prev ?? [], next)) {
      if (prev !== undefined) verified.set(prev, version);
      continue;
    }
    pass.addAlways({
      decisions: [
        decision(explain(model, prev ?? [], next), {
          case: "endpointsChanged",
          value: { model, endpoints: next },
        }),
      ],
      commands: [],
    });
  }
}

/** A model's routing table (as `routingTable` has it) from its ready groups. */
function tableOf(pass: Pass, ready: Group[]): EndpointEntry[] {
  const replicas = pass.work.replicas.replicas;
  const ids = ready.length === 1 ? (ready[0] as Group).ids() : ready.flatMap((g) => g.ids()).sort();
  const out: EndpointEntry[] = [];
  for (const id of ids) {
    const e = replicaEndpoint(replicas.get(id) as DeepReadonly<ReplicaState>);
    if (e) out.push(e);
  }
  return out;
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
