/**
 * Optional API keys of the router (`--api-keys FILE`, YAML or JSON): a list
 * of `{name, sha256, models?, requestsPerMinute?}`. As with the operator
 * API's tokens file, only each key's SHA-256 is stored; `models` limits the
 * key to those models (absent: all), `requestsPerMinute` rate-limits it
 * (a token bucket holding a minute's worth; absent: no limit). The file is
 * re-read when it changes; an invalid change keeps the keys in force.
 */
import { createHash } from "node:crypto";
import { readFileSync, unwatchFile, watchFile } from "node:fs";
import type { Logger } from "pino";
import { parse as parseYaml } from "yaml";
import { z } from "zod";

const keyEntrySchema = z.strictObject({
  name: z.string().regex(/^[\w.@+-]{1,64}$/, "must be 1 to 64 letters, digits or . _ @ + -"),
  sha256: z
    .string({ error: "must be a string of 64 lowercase hex digits (quote it in YAML)" })
    .regex(/^[0-9a-f]{64}$/, "must be the key's SHA-256 as 64 lowercase hex digits, not the key itself"),
  models: z.array(z.string().min(1)).min(1, "list at least one model, or leave models out").optional(),
  requestsPerMinute: z.int().min(1).optional(),
});

export type ApiKey = z.infer<typeof keyEntrySchema>;

const keysFileSchema = z
  .array(keyEntrySchema)
  .min(1, "the list is empty; give at least one {name, sha256}")
  .superRefine((entries, ctx) => {
    for (const field of ["name", "sha256"] as const) {
      const seen = new Set<string>();
      entries.forEach((e, i) => {
        if (seen.has(e[field]))
          ctx.addIssue({ code: "custom", path: [i, field], message: `duplicate ${field}` });
        seen.add(e[field]);
      });
    }
  });

export class ApiKeysFileError extends Error {
  override readonly name = "ApiKeysFileError";
}

export function readApiKeysFile(file: string): ApiKey[] {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    throw new ApiKeysFileError(`${file}: cannot read it: ${(err as Error).message}`);
  }
  let data: unknown;
  try {
    data = parseYaml(text, { uniqueKeys: true });
  } catch (err) {
    throw new ApiKeysFileError(`${file}: not valid YAML or JSON: ${(err as Error).message.split("\n")[0]}`);
  }
  const parsed = keysFileSchema.safeParse(data);
  if (!parsed.success) {
    throw new ApiKeysFileError(
      parsed.error.issues
        .map(
          (i) =>
            `${file}: ${i.path.map((p) => (typeof p === "number" ? `[${p}]` : `.${String(p)}`)).join("")}: ${i.message}`,
        )
        .join("\n"),
    );
  }
  return parsed.data;
}

export type KeyCheck =
  | { ok: true; key: ApiKey }
  | { ok: false; status: 401 | 403 | 429; message: string; retryAfterSeconds?: number };

export class ApiKeys {
  #bySha = new Map<string, ApiKey>();
  /** Token buckets by key name: tokens left and when they were counted. */
  readonly #buckets = new Map<string, { tokens: number; atMs: number }>();

  constructor(keys: readonly ApiKey[]) {
    this.replace(keys);
  }

  replace(keys: readonly ApiKey[]): void {
    this.#bySha = new Map(keys.map((k) => [k.sha256, k]));
  }

  /** The key an Authorization header names, if any. */
  identify(authorization: string | undefined): KeyCheck {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? "");
    if (!m) return { ok: false, status: 401, message: "an API key is required: Authorization: Bearer KEY" };
    const key = this.#bySha.get(
      createHash("sha256")
        .update(m[1] as string)
        .digest("hex"),
    );
    if (!key) return { ok: false, status: 401, message: "the API key is not valid" };
    return { ok: true, key };
  }

  /** Whether `key` may send one more request for `model` now (takes a token). */
  admit(key: ApiKey, model: string, nowMs: number): KeyCheck {
    if (key.models && !key.models.includes(model))
      return { ok: false, status: 403, message: `the API key ${key.name} may not use the model ${model}` };
    const rpm = key.requestsPerMinute;
    if (rpm !== undefined) {
      const b = this.#buckets.get(key.name) ?? { tokens: rpm, atMs: nowMs };
      b.tokens = Math.min(rpm, b.tokens + ((nowMs - b.atMs) * rpm) / 60_000);
      b.atMs = nowMs;
      this.#buckets.set(key.name, b);
      if (b.tokens < 1) {
        return {
          ok: false,
          status: 429,
          message: `the API key ${key.name} is over its ${rpm} requests per minute`,
          retryAfterSeconds: Math.max(1, Math.ceil(((1 - b.tokens) * 60) / rpm)),
        };
      }
      b.tokens -= 1;
    }
    return { ok: true, key };
  }

  /** Whether `key` may see `model` in /v1/models. */
  static allows(key: ApiKey | undefined, model: string): boolean {
    return key?.models === undefined || key.models.includes(model);
  }
}

/** Re-reads the file when it changes; returns a function that stops watching. */
export function watchApiKeysFile(file: string, keys: ApiKeys, logger: Logger): () => void {
  const listener = (cur: { mtimeMs: number; size: number }, prev: typeof cur) => {
    if (cur.mtimeMs === prev.mtimeMs && cur.size === prev.size) return;
    try {
      const list = readApiKeysFile(file);
      keys.replace(list);
      logger.info({ file, keys: list.map((k) => k.name) }, "API keys reloaded");
    } catch (err) {
      logger.error(
        { file, err: (err as Error).message },
        "the changed API keys file is invalid; the keys in force stay",
      );
    }
  };
  watchFile(file, { interval: 1000, persistent: false }, listener);
  return () => unwatchFile(file, listener);
}
