/**
 * The catalog's history as the log records it: every CatalogChanged, read
 * from the log's catalog subject (the only I/O here). What an undo applies
 * is worked out over it by the pure `undoCatalog` (undo.ts).
 */
import type { Log } from "../../log/index.js";
import { modelFrom } from "../../projections/convert.js";
import { type CatalogVersion, catalogVersionOf } from "./undo.js";

/** Every catalog applied, oldest first, up to `untilSeq` (default: the log's end). */
export async function readCatalogHistory(log: Log, untilSeq?: number): Promise<CatalogVersion[]> {
  const out: CatalogVersion[] = [];
  for await (const r of log.read({ subjects: [log.subjects.catalog], ...(untilSeq ? { untilSeq } : {}) })) {
    const v = catalogVersionOf(r);
    if (v) out.push(v);
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
