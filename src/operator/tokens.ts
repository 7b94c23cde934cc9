/**
 * The operator API's tokens: a list of `{name, role, sha256}` (the file of
 * `llmgw api --tokens`, YAML or JSON). Only the token's SHA-256 is stored, so
 * the file is no secret; the name is what the log records as the operator
 * of every write made with the token.
 */
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import { parse as parseYaml } from "yaml";
import { z } from "zod";
import type { FieldIssue } from "./catalog/index.js";
import { ROLES, type Role } from "./roles.js";

/** A name as the log records it: no spaces, nothing a subject or a shell would read. */
export const TOKEN_NAME = /^[\w.@+-]{1,64}$/;

export const tokenEntrySchema = z.strictObject({
  name: z.string().regex(TOKEN_NAME, "must be 1 to 64 letters, digits or . _ @ + -"),
  role: z.enum(ROLES, { error: `must be one of ${ROLES.join(", ")}` }),
  sha256: z
    // A hash of digits only reads as a number in YAML; quoting it keeps it text.
    .string({ error: "must be a string of 64 lowercase hex digits (quote it in YAML)" })
    .regex(/^[0-9a-f]{64}$/, "must be the token's SHA-256 as 64 lowercase hex digits, not the token itself"),
});

export type ApiToken = z.infer<typeof tokenEntrySchema>;

export const tokensFileSchema = z
  .array(tokenEntrySchema)
  .min(1, "the list is empty; give at least one {name, role, sha256}")
  .superRefine((entries, ctx) => {
    for (const field of ["name", "sha256"] as const) {
      const first = new Map<string, number>();
      entries.forEach((e, i) => {
        const seen = first.get(e[field]);
        if (seen === undefined) first.set(e[field], i);
        else
          ctx.addIssue({
            code: "custom",
            path: [i, field],
            message: `duplicate ${field}: entry ${seen} has it too`,
          });
      });
    }
  });

export type TokensResult = { ok: true; tokens: ApiToken[] } | { ok: false; issues: FieldIssue[] };

/** Parses a tokens file (YAML, of which JSON is a subset) and validates it; issues name entry and field (`[2].role`). */
export function parseTokensText(text: string): TokensResult {
  let data: unknown;
  try {
    data = parseYaml(text, { uniqueKeys: true });
  } catch (err) {
    return {
      ok: false,
      issues: [{ path: "", message: `not valid YAML or JSON: ${(err as Error).message.split("\n")[0]}` }],
    };
  }
  if (data === null || data === undefined) {
    return {
      ok: false,
      issues: [{ path: "", message: "the file is empty; give a list of {name, role, sha256}" }],
    };
  }
  const parsed = tokensFileSchema.safeParse(data);
  if (parsed.success) return { ok: true, tokens: parsed.data };
  return {
    ok: false,
    issues: parsed.error.issues.map((i) => ({
      path: i.path
        .map((p) => (typeof p === "number" ? `[${p}]` : `.${String(p)}`))
        .join("")
        .replace(/^\./, ""),
      message: i.code === "unrecognized_keys" ? `unknown field ${i.keys.join(", ")}` : i.message,
    })),
  };
}

/** The SHA-256 of a token in lowercase hex: what a tokens file stores. */
export function tokenSha256(token: string): string {
  return createHash("sha256").update(token).digest("hex");
}

/** A new random token: 32 bytes, base64url. */
export function newToken(): string {
  return randomBytes(32).toString("base64url");
}

/** Who a request acts as: the token's name and role (dev mode: a fixed name). */
export interface Principal {
  name: string;
  role: Role;
}

/**
 * The tokens in force. A presented token is hashed and compared with every
 * entry in constant time, so neither which entry matched nor how much of a
 * digest did leaks through timing. `replace` swaps the list (a reloaded file).
 */
export class TokenTable {
  #entries: Array<{ digest: Buffer; principal: Principal }> = [];

  constructor(tokens: readonly ApiToken[]) {
    this.replace(tokens);
  }

  replace(tokens: readonly ApiToken[]): void {
    this.#entries = tokens.map((t) => ({
      digest: Buffer.from(t.sha256, "hex"),
      principal: { name: t.name, role: t.role },
    }));
  }

  get size(): number {
    return this.#entries.length;
  }

  lookup(token: string): Principal | undefined {
    const digest = createHash("sha256").update(token).digest();
    let found: Principal | undefined;
    for (const e of this.#entries) {
      if (timingSafeEqual(digest, e.digest)) found = e.principal;
    }
    return found;
  }
}
