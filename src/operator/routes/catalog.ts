/**
 * The catalog: read the one in force, apply a new one. Applying is
 * optimistic: `If-Match` names the catalog sequence the change was based on,
 * and the append is fenced on the catalog subject, so of two operators
 * editing the same catalog one wins and the other gets 412.
 */
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { isLogError } from "../../log/index.js";
import { modelFrom } from "../../projections/convert.js";
import { readCatalogHistory, versionSummary } from "../catalog/history.js";
import {
  type CatalogFile,
  type CatalogFormat,
  catalogFileFrom,
  parseCatalogText,
  toProtoCatalog,
} from "../catalog/index.js";
import { type ApiContext, appendAndWait } from "../context.js";
import { ApiError, invalid, notFound } from "../errors.js";
import { principalOf } from "../principal.js";
import { parseWith, seqParam } from "./params.js";

const JSON_TYPES = ["application/json"];
/** The media types a catalog is written in as YAML (the development-mode site guard takes them too). */
export const YAML_TYPES = ["application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml"];

export const etagOf = (seq: number) => `"${seq}"`;

export const catalogAtQuery = z.strictObject({
  /** The catalog in force at this log sequence instead of now. */
  at: seqParam.optional(),
});

/** The sequence in an If-Match header, undefined when absent or `*`. */
export function parseIfMatch(header: string | undefined): number | undefined {
  if (header === undefined || header.trim() === "*") return undefined;
  const m = /^\s*(?:W\/)?"?(\d{1,15})"?\s*$/.exec(header);
  if (!m?.[1]) {
    throw invalid(
      `If-Match must be the catalog's sequence as returned in its ETag (e.g. "12"), got ${header}`,
    );
  }
  return Number(m[1]);
}

function formatOf(contentType: string | undefined): CatalogFormat {
  const t = (contentType ?? "").split(";")[0]?.trim().toLowerCase() ?? "";
  return JSON_TYPES.includes(t) ? "json" : "yaml";
}

/**
 * Appends a catalog fenced on the catalog subject's sequence `expected` (the
 * catalog the change was based on) and waits until the projection folded
 * it; 412 when someone applied another one first. Every catalog write goes
 * through here (PUT /v1/catalog, PATCH /v1/models/:model).
 */
export async function applyCatalog(
  ctx: ApiContext,
  catalog: CatalogFile,
  expected: number,
  appliedBy: string,
): Promise<number> {
  try {
    const appended = await appendAndWait(
      ctx,
      { case: "catalogChanged", value: { catalog: toProtoCatalog(catalog), appliedBy } },
      { expectLastSubjectSeq: expected },
    );
    return appended.seq;
  } catch (err) {
    if (!isLogError(err, "wrong-last-sequence")) throw err;
    const now = await ctx.log.lastSubjectSeq(ctx.log.subjects.catalog).catch(() => undefined);
    throw new ApiError(
      412,
      "precondition-failed",
      `the catalog changed: the change was based on sequence ${expected}, the catalog in force is at ${now ?? "a newer sequence"}; fetch it and apply again`,
      now === undefined ? {} : { seq: now },
    );
  }
}

export async function catalogRoutes(app: FastifyInstance, ctx: ApiContext): Promise<void> {
  // The catalog body is parsed here, not by the server, so a JSON syntax
  // error is reported like every other invalid catalog.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser([...JSON_TYPES, ...YAML_TYPES], { parseAs: "string" }, (_req, body, done) =>
    done(null, body),
  );

  app.get("/v1/catalog", async (req, reply) => {
    const q = parseWith(catalogAtQuery, req.query, "query");
    if (q.at !== undefined && q.at < ctx.runtime.state.seq) {
      // The catalog in force at a past sequence: the newest CatalogChanged up to it.
      const v = (await readCatalogHistory(ctx.log, q.at)).at(-1);
      if (!v) throw notFound(`a catalog at or before sequence ${q.at}`);
      const models = v.catalog.models.map(modelFrom);
      return { seq: v.seq, appliedBy: v.appliedBy, catalog: catalogFileFrom(models) };
    }
    const c = ctx.runtime.state.replicas.catalog;
    reply.header("etag", etagOf(c.seq));
    return { seq: c.seq, appliedBy: c.appliedBy, catalog: catalogFileFrom(c.models) };
  });

  app.get("/v1/catalog/history", async () => {
    const history = await readCatalogHistory(ctx.log);
    return { seq: ctx.runtime.state.seq, history: history.map(versionSummary) };
  });

  app.put("/v1/catalog", async (req, reply) => {
    const ifMatch = parseIfMatch(req.headers["if-match"]);
    const text = typeof req.body === "string" ? req.body : "";
    const result = parseCatalogText(text, formatOf(req.headers["content-type"]));
    if (!result.ok) {
      const n = result.issues.length;
      throw new ApiError(400, "invalid-catalog", `the catalog has ${n} invalid field${n === 1 ? "" : "s"}`, {
        issues: result.issues,
      });
    }
    const expected = ifMatch ?? (await ctx.log.lastSubjectSeq(ctx.log.subjects.catalog));
    const appliedBy = principalOf(req).name;
    const seq = await applyCatalog(ctx, result.catalog, expected, appliedBy);
    req.log.info({ seq, appliedBy, models: result.catalog.models.length }, "catalog applied");
    reply.header("etag", etagOf(seq));
    return { seq, models: result.catalog.models.map((m) => ({ name: m.name, replicas: m.replicas })) };
  });
}
