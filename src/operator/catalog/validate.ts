/**
 * Parsing and validating a catalog file. Every problem is reported at once,
 * each with the path of the field it is about, so an operator fixes a file
 * in one round instead of one error per apply.
 */
import { parseDocument } from "yaml";
import type { z } from "zod";
import { type CatalogFile, catalogFileSchema } from "./schema.js";

/** One invalid field: where (`models[1].profiles[0].shards`, "" for the whole file) and why. */
export interface FieldIssue {
  path: string;
  message: string;
}

export type CatalogResult = { ok: true; catalog: CatalogFile } | { ok: false; issues: FieldIssue[] };

export type CatalogFormat = "yaml" | "json";

/** Parses catalog text (YAML, of which JSON is a subset, or strict JSON) and validates it. */
export function parseCatalogText(text: string, format: CatalogFormat): CatalogResult {
  if (format === "json") {
    let data: unknown;
    try {
      data = JSON.parse(text);
    } catch (err) {
      return { ok: false, issues: [{ path: "", message: `invalid JSON: ${(err as Error).message}` }] };
    }
    return validateCatalog(data);
  }
  const doc = parseDocument(text, { prettyErrors: true, uniqueKeys: true });
  if (doc.errors.length > 0) {
    return {
      ok: false,
      issues: doc.errors.map((e) => ({ path: "", message: `invalid YAML: ${firstLine(e.message)}` })),
    };
  }
  let data: unknown;
  try {
    // Aliases are bounded so a small file cannot expand into a huge one.
    data = doc.toJS({ maxAliasCount: 100 });
  } catch (err) {
    return {
      ok: false,
      issues: [{ path: "", message: `invalid YAML: ${firstLine((err as Error).message)}` }],
    };
  }
  return validateCatalog(data);
}

/** Validates parsed data: the schema plus the checks across fields. */
export function validateCatalog(data: unknown): CatalogResult {
  if (data === null || data === undefined) {
    return {
      ok: false,
      issues: [{ path: "", message: "the catalog is empty; write `models: []` to serve nothing" }],
    };
  }
  const parsed = catalogFileSchema.safeParse(data);
  // Cross-field checks run on the raw data even when the schema failed, so
  // a duplicate name is reported together with a wrong type elsewhere.
  const issues = [
    ...(parsed.success ? [] : parsed.error.issues.flatMap((i) => fromZod(data, i))),
    ...crossFieldIssues(data),
  ];
  if (issues.length > 0 || !parsed.success) return { ok: false, issues: dedupe(issues) };
  return { ok: true, catalog: parsed.data };
}

function crossFieldIssues(data: unknown): FieldIssue[] {
  const issues: FieldIssue[] = [];
  if (!isRecord(data) || !Array.isArray(data["models"])) return issues;
  const models: unknown[] = data["models"];
  const firstModel = new Map<string, number>();
  models.forEach((m, i) => {
    if (!isRecord(m)) return;
    const at = `models[${i}]`;
    const name = m["name"];
    if (typeof name === "string") {
      const first = firstModel.get(name);
      if (first === undefined) firstModel.set(name, i);
      else
        issues.push({
          path: `${at}.name`,
          message: `duplicate model name ${JSON.stringify(name)} (also models[${first}])`,
        });
    }
    const profiles = m["profiles"];
    const replicas = m["replicas"];
    if (
      typeof replicas === "number" &&
      replicas > 0 &&
      (profiles === undefined || (Array.isArray(profiles) && profiles.length === 0))
    ) {
      issues.push({
        path: `${at}.profiles`,
        message: `a model with ${replicas} replicas needs at least one profile`,
      });
    }
    if (!Array.isArray(profiles)) return;
    const firstProfile = new Map<string, number>();
    profiles.forEach((p: unknown, j) => {
      if (!isRecord(p)) return;
      const pat = `${at}.profiles[${j}]`;
      const pname = p["name"];
      if (typeof pname === "string") {
        const first = firstProfile.get(pname);
        if (first === undefined) firstProfile.set(pname, j);
        else
          issues.push({
            path: `${pat}.name`,
            message: `duplicate profile name ${JSON.stringify(pname)} in this model (also profiles[${first}])`,
          });
      }
      const shards = p["shards"];
      const fabric = p["fabricKind"];
      if (typeof shards === "number" && shards > 1 && (fabric === undefined || fabric === "")) {
        issues.push({
          path: `${pat}.fabricKind`,
          message: `a profile with ${shards} shards spans nodes and needs a fabricKind (the interconnect they share, e.g. "infiniband")`,
        });
      }
    });
  });
  return issues;
}

function fromZod(data: unknown, issue: z.core.$ZodIssue): FieldIssue[] {
  const path = formatPath(issue.path);
  if (issue.code === "unrecognized_keys") {
    // One issue per key, each at the key's own path, like every other field.
    return issue.keys.map((k) => ({ path: joinPath(path, k), message: "unknown field" }));
  }
  if (issue.code === "invalid_key") {
    // zod says only "Invalid key in record": the key's own issues say why.
    return issue.issues.map((i) => ({ path, message: i.message }));
  }
  const message = issue.code === "invalid_type" && !has(data, issue.path) ? "required" : issue.message;
  return [{ path, message }];
}

export function formatPath(path: ReadonlyArray<PropertyKey>): string {
  let out = "";
  for (const p of path) out = typeof p === "number" ? `${out}[${p}]` : joinPath(out, String(p));
  return out;
}

function joinPath(base: string, key: string): string {
  const k = /^[A-Za-z_][A-Za-z0-9_]*$/.test(key) ? key : JSON.stringify(key);
  return base === "" ? k : /^[A-Za-z_]/.test(k) ? `${base}.${k}` : `${base}[${k}]`;
}

function dedupe(issues: FieldIssue[]): FieldIssue[] {
  const seen = new Set<string>();
  return issues.filter((i) => {
    const k = `${i.path}\u0000${i.message}`;
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
}

/** Whether the raw data has a value at `path` (a missing field versus a wrong type). */
function has(data: unknown, path: ReadonlyArray<PropertyKey>): boolean {
  let v: unknown = data;
  for (const p of path) {
    if (v === null || typeof v !== "object" || !(String(p) in v)) return false;
    v = (v as Record<string, unknown>)[String(p)];
  }
  return v !== undefined;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

function firstLine(s: string): string {
  return (s.split("\n")[0] ?? s).trim().replace(/:$/, "");
}
