/**
 * The catalog's history as the log records it: every CatalogChanged, and
 * what an undo of one model's rollout applies. The read is the only I/O;
 * `undoCatalog` is pure.
 */
import { create } from "@bufbuild/protobuf";
import { launchIssues } from "../../engine-policy/index.js";
import { type Catalog, CatalogSchema, type Model } from "../../gen/llmgw/v1/events_pb.js";
import type { Log } from "../../log/index.js";
import { modelFrom } from "../../projections/convert.js";

export interface CatalogVersion {
  seq: number;
  timeMs: number;
  appliedBy: string;
  catalog: Catalog;
}

/** Every catalog applied, oldest first, up to `untilSeq` (default: the log's end). */
export async function readCatalogHistory(log: Log, untilSeq?: number): Promise<CatalogVersion[]> {
  const out: CatalogVersion[] = [];
  for await (const r of log.read({ subjects: [log.subjects.catalog], ...(untilSeq ? { untilSeq } : {}) })) {
    const b = r.event.body;
    if (b.case !== "catalogChanged") continue;
    out.push({
      seq: r.seq,
      timeMs: r.timeMs,
      appliedBy: b.value.appliedBy,
      catalog: b.value.catalog ?? create(CatalogSchema, {}),
    });
  }
  return out;
}

/** One line per model of a catalog version: its count and spec revision. */
export function versionSummary(v: CatalogVersion) {
  return {
    seq: v.seq,
    timeMs: v.timeMs,
    appliedBy: v.appliedBy,
    models: v.catalog.models.map((m) => {
      const spec = modelFrom(m);
      return { name: m.name, replicas: m.replicas, revision: spec.revision };
    }),
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
