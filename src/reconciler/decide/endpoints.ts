/**
 * The routing table. Runs last, on the state this pass's own decisions
 * leave (a drain started, a replica failed or removed, shards that now all
 * run), and restates the table of every model whose ready replicas differ
 * from the table the log records. These units are never cut by the pass
 * limit: a replica whose drain starts in a pass leaves the table in that
 * same pass, before any gateway relays its DrainShard.
 */
import { type Endpoint, EndpointSchema } from "../../gen/llmgw/v1/events_pb.js";
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
 * its model's ready replica groups when the routing table was last found
 * equal to it. While neither changed, the model's table is not built again:
 * a pass reads the replicas of the models whose ready replicas changed, not
 * every ready replica of the fleet. Only ready groups count: the table
 * lists ready replicas only, so a replica placed, starting or failed that
 * was not ready leaves it alone (a pass placing one replica of a model of
 * 16,000 read all 16,000 otherwise). Versions never repeat and a group
 * emptied stays with a new version, so a ready group that changed, appeared
 * or emptied raises the model's highest. The fold replaces a model's array
 * when its table changes, so an array never stands for two tables.
 */
const verified = new WeakMap<readonly EndpointEntry[], number>();

export function publishEndpoints(pass: Pass): void {
  const have = pass.work.replicas.endpoints;
  const byModel = new Map<string, { version: number; ready: Group[] }>();
  for (const [c, g] of replicaGroups(pass.work)) {
    let m = byModel.get(c.model);
    if (m === undefined) {
      m = { version: 0, ready: [] };
      byModel.set(c.model, m);
    }
    if (!c.ready) continue;
    m.version = Math.max(m.version, g.version);
    if (g.size > 0) m.ready.push(g);
  }
  const models = [...new Set([...byModel.keys(), ...Object.keys(have)])].sort();
  for (const model of models) {
    const prev = have[model];
    const version = byModel.get(model)?.version ?? 0;
    if (prev !== undefined && verified.get(prev) === version) continue;
    const next = tableOf(pass, byModel.get(model)?.ready ?? []);
    const change = changeOf(model, prev ?? [], next);
    if (change === null) {
      if (prev !== undefined) verified.set(prev, version);
      continue;
    }
    pass.addAlways({
      decisions: [decision(change, { case: "endpointsChanged", value: { model, endpoints: next } })],
      commands: [],
    });
  }
}

/**
 * A model's routing table (as `routingTable` has it) from its ready groups,
 * its rows already `Endpoint` messages: the decision takes them as they are
 * (proto3 messages are plain objects with their type name; `create` made
 * each of 16,000 rows again, field by field, for every table published).
 */
function tableOf(pass: Pass, ready: Group[]): Endpoint[] {
  const replicas = pass.work.replicas.replicas;
  const ids = ready.length === 1 ? (ready[0] as Group).ids() : ready.flatMap((g) => g.ids()).sort();
  const out: Endpoint[] = [];
  for (const id of ids) {
    const e = replicaEndpoint(replicas.get(id) as ReplicaState);
    if (e) out.push({ $typeName: ENDPOINT, replicaId: e.replicaId, url: e.url, nodeId: e.nodeId });
  }
  return out;
}

const ENDPOINT = EndpointSchema.typeName as Endpoint["$typeName"];

/**
 * What changed from `prev` to `next` as the decision explains it, or null
 * when the lists are the same (the same replicas at the same places, in the
 * same order). Both lists sorted by replica id (as the pass builds them and
 * the fold records them): one walk over both, no maps of 16,000 entries per
 * changed model. Otherwise (a table recorded in another order) by maps.
 */
function changeOf(
  model: string,
  prev: readonly EndpointEntry[],
  next: readonly EndpointEntry[],
): string | null {
  if (!sortedById(prev) || !sortedById(next)) {
    return sameEndpoints(prev, next) ? null : explainUnsorted(model, prev, next);
  }
  const entered: string[] = [];
  const left: string[] = [];
  let same = prev.length === next.length;
  let i = 0;
  let j = 0;
  while (i < prev.length || j < next.length) {
    const p = prev[i];
    const n = next[j];
    if (n === undefined || (p !== undefined && p.replicaId < n.replicaId)) {
      left.push(`${(p as EndpointEntry).replicaId} no longer ready`);
      same = false;
      i++;
    } else if (p === undefined || n.replicaId < p.replicaId) {
      entered.push(`${n.replicaId} ready at ${n.url}`);
      same = false;
      j++;
    } else {
      if (p.url !== n.url) {
        entered.push(`${n.replicaId} moved to ${n.url}`);
        same = false;
      } else if (p.nodeId !== n.nodeId) same = false;
      i++;
      j++;
    }
  }
  if (same) return null;
  return `routing table of ${model}: ${[...entered, ...left].join(", ")}; ${next.length} endpoint(s)`;
}

function sortedById(list: readonly EndpointEntry[]): boolean {
  for (let i = 1; i < list.length; i++)
    if (!((list[i - 1] as EndpointEntry).replicaId < (list[i] as EndpointEntry).replicaId)) return false;
  return true;
}

function explainUnsorted(
  model: string,
  prev: readonly EndpointEntry[],
  next: readonly EndpointEntry[],
): string {
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
