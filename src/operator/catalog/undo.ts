/**
 * What `llmgw rollout undo` (POST /v1/rollouts/:model/undo) applies, worked
 * out over the catalog's history as the log records it. Pure: the API reads
 * the history from the log (history.ts), the simulation from its own log,
 * and both hand it here.
 */
import { create } from "@bufbuild/protobuf";
import { launchIssues } from "../../engine-policy/index.js";
import { type Catalog, CatalogSchema, type Event, type Model } from "../../gen/llmgw/v1/events_pb.js";
import { modelFrom } from "../../projections/convert.js";

export interface CatalogVersion {
  seq: number;
  timeMs: number;
  appliedBy: string;
  catalog: Catalog;
}

/** The catalog version a stored event applied, or undefined when it is no CatalogChanged. */
export function catalogVersionOf(r: {
  seq: number;
  timeMs: number;
  event: Event;
}): CatalogVersion | undefined {
  const b = r.event.body;
  if (b.case !== "catalogChanged") return undefined;
  return {
    seq: r.seq,
    timeMs: r.timeMs,
    appliedBy: b.value.appliedBy,
    catalog: b.value.catalog ?? create(CatalogSchema, {}),
  };
}

export type UndoResult =
  | { ok: true; catalog: Catalog; fromSeq: number; revision: string }
  | { ok: false; message: string };

/**
 * The catalog in force (the newest version) with `model`'s profiles as they
 * were in the newest earlier version whose spec revision differs from the
 * current one: the previous spec. Its replica count and rollout policy stay
 * as they are now; every other model is untouched.
 */
export function undoCatalog(history: readonly CatalogVersion[], model: string): UndoResult {
  const current = history.at(-1);
  const now = current?.catalog.models.find((m) => m.name === model);
  if (!current || !now) return { ok: false, message: `model ${model} is not in the catalog in force` };
  const revision = modelFrom(now).revision;
  for (let i = history.length - 2; i >= 0; i--) {
    const v = history[i] as CatalogVersion;
    const before = v.catalog.models.find((m) => m.name === model);
    if (!before) continue;
    const was = modelFrom(before).revision;
    if (was === revision) continue;
    // An earlier spec is applied again only if it could be applied now (a log
    // written before the engine policy, or past the API, may hold one that is not).
    for (const [j, p] of before.profiles.entries()) {
      const bad = launchIssues(p.engineArgs, p.engineEnv)[0];
      if (bad)
        return {
          ok: false,
          message: `the earlier spec of ${model} (catalog at sequence ${v.seq}) cannot be applied again: profiles[${j}].${bad.path} ${bad.message}`,
        };
    }
    const models: Model[] = current.catalog.models.map((m) =>
      m.name === model ? { ...m, profiles: before.profiles } : m,
    );
    return { ok: true, catalog: create(CatalogSchema, { models }), fromSeq: v.seq, revision: was };
  }
  return {
    ok: false,
    message: `the log records no earlier spec of ${model} than its current revision ${revision}: nothing to undo`,
  };
}
