/**
 * Operator contexts, like kubectl's: named API URLs with a token file, and
 * the one in use, kept in `$XDG_CONFIG_HOME/llmgw/config.yaml` (else
 * `~/.config/llmgw/config.yaml`; LLMGW_CONFIG or `llmgw config --config`
 * names another file). A command that reaches the API takes its URL and
 * token from the flags, then the environment, then the current context.
 */
import { mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { parse as parseYaml, stringify as stringifyYaml } from "yaml";
import { z } from "zod";
import { CliError } from "./common.js";

const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/;

const contextName = z.string().regex(NAME, "must be 1 to 63 letters, digits, '.', '_' or '-'");

const apiUrl = z.string().refine((s) => {
  try {
    const u = new URL(s);
    return u.protocol === "http:" || u.protocol === "https:";
  } catch {
    return false;
  }
}, "must be an http:// or https:// URL, e.g. https://llmgw-api.example.com");

export const contextSchema = z.strictObject({
  name: contextName,
  api: apiUrl,
  /** A file holding the bearer token (the token itself is never stored here). */
  tokenFile: z.string().min(1, "must be a file path").optional(),
});

export const contextsFileSchema = z
  .strictObject({
    apiVersion: z.literal("llmgw/v1", { error: 'must be "llmgw/v1"' }).default("llmgw/v1"),
    currentContext: contextName.optional(),
    contexts: z.array(contextSchema).default([]),
  })
  .superRefine((f, ctx) => {
    const seen = new Map<string, number>();
    f.contexts.forEach((c, i) => {
      const first = seen.get(c.name);
      if (first !== undefined)
        ctx.addIssue({
          code: "custom",
          path: ["contexts", i, "name"],
          message: `duplicate name: contexts[${first}] has it too`,
        });
      seen.set(c.name, i);
    });
    if (f.currentContext !== undefined && !seen.has(f.currentContext))
      ctx.addIssue({
        code: "custom",
        path: ["currentContext"],
        message: `names no context of the file (${[...seen.keys()].join(", ") || "it has none"})`,
      });
  });

export type OperatorContext = z.infer<typeof contextSchema>;
export type ContextsFile = z.infer<typeof contextsFileSchema>;

/** The contexts file: `override` (a flag), LLMGW_CONFIG, then the XDG place. */
export function contextsFilePath(override?: string, env: NodeJS.ProcessEnv = process.env): string {
  if (override) return resolve(override);
  const fromEnv = env["LLMGW_CONFIG"];
  if (fromEnv) return resolve(fromEnv);
  const xdg = env["XDG_CONFIG_HOME"];
  const base = xdg?.startsWith("/") ? xdg : join(env["HOME"] || homedir(), ".config");
  return join(base, "llmgw", "config.yaml");
}

function fieldPath(path: readonly PropertyKey[]): string {
  return path
    .map((p) => (typeof p === "number" ? `[${p}]` : `.${String(p)}`))
    .join("")
    .replace(/^\./, "");
}

/** Reads and validates the file; a missing file is an empty one. A bad one is a CliError naming the field. */
export function readContextsFile(file: string): ContextsFile {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return { apiVersion: "llmgw/v1", contexts: [] };
    throw new CliError(`${file}: cannot read it: ${(err as Error).message}`);
  }
  let data: unknown;
  try {
    data = parseYaml(text, { uniqueKeys: true }) ?? {};
  } catch (err) {
    throw new CliError(`${file}: not valid YAML: ${(err as Error).message.split("\n")[0]}`);
  }
  const parsed = contextsFileSchema.safeParse(data);
  if (parsed.success) return parsed.data;
  throw new CliError(
    parsed.error.issues
      .map((i) => {
        const where = fieldPath(i.path);
        const what = i.code === "unrecognized_keys" ? `unknown field ${i.keys.join(", ")}` : i.message;
        return `${file}: ${where ? `${where}: ` : ""}${what}`;
      })
      .join("\n"),
  );
}

/** Writes the file whole (through a temporary file and a rename, so a reader never sees half of it). */
export function writeContextsFile(file: string, data: ContextsFile): void {
  mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, stringifyYaml(data), { mode: 0o600 });
  renameSync(tmp, file);
}

/** The context in use, if any. */
export function currentContext(file: string): OperatorContext | undefined {
  const f = readContextsFile(file);
  if (f.currentContext === undefined) return undefined;
  return f.contexts.find((c) => c.name === f.currentContext);
}

/** The token a context's token file holds (trimmed); an unreadable or empty file is a CliError naming the context. */
export function contextToken(ctx: OperatorContext): string | undefined {
  if (ctx.tokenFile === undefined) return undefined;
  let token: string;
  try {
    token = readFileSync(ctx.tokenFile, "utf8").trim();
  } catch (err) {
    throw new CliError(
      `context ${ctx.name}: tokenFile ${ctx.tokenFile}: cannot read it: ${(err as Error).message}`,
    );
  }
  if (token === "") throw new CliError(`context ${ctx.name}: tokenFile ${ctx.tokenFile} is empty`);
  return token;
}
