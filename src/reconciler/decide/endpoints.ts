/**
 * The routing table. Runs last, on the state this pass's own decisions
 * leave (a drain started, a replica failed or removed, shards that now all
 * run), and restates the table of every model whose ready replicas differ
 * from the table the log records. These units are never cut by the pass
 * limit: a replica whose drain starts in a pass leaves the table in that
 * same pass, before any gateway relays its DrainShard.
 */

import {
  type Endpoint,
  type EndpointsChanged,
  EndpointsChangedSchema,
} from "../../gen/llmgw/v1/events_pb.js";
import type { EndpointEntry } from "../../projections/index.js";
import { routingRows } from "./kept-routes.js";
import { decision } from "./messages.js";
import type { Pass } from "./pass.js";

/**
 * A recorded table (the array the fold keeps for a model) → the kept rows
 * (kept-routes.ts) last found equal to it. While the kept rows of its model
 * are that same array, nothing changed: the model is skipped without
 * reading a row. When they changed, the walk compares the two kept arrays,
 * whose unchanged rows are the same objects. The fold replaces a model's
 * array when its table changes, so an array never stands for two tables.
 */
const matches = new WeakMap<readonly EndpointEntry[], readonly Endpoint[]>();

const NONE: readonly Endpoint[] = [];

export function publishEndpoints(pass: Pass): void {
  const have = pass.work.replicas.endpoints;
  const tables = routingRows(pass.work.replicas.replicas);
  const models = [...new Set([...tables.keys(), ...Object.keys(have)])].sort();
  for (const model of models) {
    const prev = have[model];
    const next = tables.get(model) ?? NONE;
    const base = prev === undefined ? NONE : matches.get(prev);
    if (base === next) continue;
    const change = changeOf(model, base ?? (prev as readonly EndpointEntry[]), next);
    if (change === null) {
      if (prev !== undefined) matches.set(prev, next);
      continue;
    }
    pass.addAlways({
      decisions: [decision(change, { case: "endpointsChanged", value: endpointsChanged(model, next) })],
      commands: [],
    });
  }
}

/**
 * The decision's body, made as the message it is with the kept rows (a
 * copy of the list): `create` would check each of 16,000 rows again.
 */
function endpointsChanged(model: string, rows: readonly Endpoint[]): EndpointsChanged {
  return { $typeName: ENDPOINTS_CHANGED, model, endpoints: rows.slice() };
}

const ENDPOINTS_CHANGED = EndpointsChangedSchema.typeName as EndpointsChanged["$typeName"];

/**
 * What changed from `prev` to `next` as the decision explains it, or null
 * when the lists are the same (the same replicas at the same places, in the
 * same order). Both are sorted by replica id: `next` is the kept table's,
 * and `prev` is what a pass published (the fold records it as published),
 * so one walk over both compares them, no maps of 16,000 entries per
 * changed model. (A recorded table out of order would compare as changed
 * and be published again, sorted.)
 */
function changeOf(
  model: string,
  prev: readonly EndpointEntry[],
  next: readonly EndpointEntry[],
): string | null {
  const entered: string[] = [];
  const left: string[] = [];
  let same = prev.length === next.length;
  let i = 0;
  let j = 0;
  while (i < prev.length || j < next.length) {
    const p = prev[i];
    const n = next[j];
    if (p === n) {
      i++;
      j++;
    } else if (n === undefined || (p !== undefined && p.replicaId < n.replicaId)) {
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
