/** Validation of path and query parameters shared by the routes. */
import { z } from "zod";
import { invalidNodeIdReason, isReservedKey } from "../../ids/index.js";
import { formatPath, NAME_PATTERN } from "../catalog/index.js";
import { ApiError, invalid } from "../errors.js";

/** A node id, as typed (a DNS name, dots included): the log's own rule applies. */
export function nodeIdParam(params: unknown): string {
  const id = (params as { id?: string }).id ?? "";
  const why = invalidNodeIdReason(id);
  if (why) throw invalid(why);
  return id;
}

/** A GPU index in a path: a whole number as the node registered it (checked against the node by the route). */
export function gpuIndexParam(params: unknown): number {
  const raw = (params as { index?: string }).index ?? "";
  if (!/^\d{1,9}$/.test(raw)) {
    throw invalid(`gpu index ${JSON.stringify(raw.slice(0, 32))} must be a whole number ≥ 0`);
  }
  return Number(raw);
}

/** A model name in a path (`:model`): the catalog's rule. */
export function modelParam(params: unknown): string {
  const name = (params as { model?: string }).model ?? "";
  if (!NAME_PATTERN.test(name)) {
    throw invalid(
      `model ${JSON.stringify(name.slice(0, 80))} must be 1 to 64 characters: letters, digits, '.', '_' or '-', starting with a letter or digit`,
    );
  }
  return name;
}

const REPLICA_ID = /^[A-Za-z0-9._:-]{1,128}$/;

export function replicaIdParam(params: unknown): string {
  const id = (params as { id?: string }).id ?? "";
  if (!REPLICA_ID.test(id)) {
    throw invalid(`replica id ${JSON.stringify(id)} must be 1 to 128 letters, digits, '.', ':', '_' or '-'`);
  }
  if (isReservedKey(id)) throw invalid(`replica id ${JSON.stringify(id)} is a reserved name`);
  return id;
}

/** Parses with a zod schema; a failure is a 400 naming every bad field. */
export function parseWith<T extends z.ZodType>(schema: T, value: unknown, what: string): z.output<T> {
  const r = schema.safeParse(value ?? {});
  if (r.success) return r.data;
  const issues = r.error.issues.map((i) => ({
    path: formatPath(i.path),
    message: i.code === "unrecognized_keys" ? `unknown ${i.keys.map(nameOfUnknown).join(", ")}` : i.message,
  }));
  const summary = issues.map((i) => (i.path ? `${i.path}: ${i.message}` : i.message)).join("; ");
  return badRequest(`invalid ${what}: ${summary}`, issues);
}

/**
 * An unknown key is named when it looks like a parameter name. Anything
 * else (`?<token>` pasted into a URL) is not echoed into the answer and the
 * log, where a secret would outlive the request.
 */
function nameOfUnknown(key: string): string {
  return /^[A-Za-z][A-Za-z_]{0,31}$/.test(key) ? JSON.stringify(key) : "a parameter whose name is not shown";
}

function badRequest(message: string, issues: Array<{ path: string; message: string }>): never {
  throw new ApiError(400, "invalid-argument", message, { issues });
}

/** A non-negative integer from a query string. */
export const seqParam = z.coerce
  .number({ error: "must be a number" })
  .int("must be a whole number")
  .min(0, "must not be negative");
