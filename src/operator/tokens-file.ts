/**
 * The tokens file of `llmgw api --tokens FILE`, read at start and re-read
 * when it changes: adding, rotating or revoking a token is an edit of the
 * file, no restart. A changed file that does not validate is reported and
 * the tokens in force stay as they were, so a typo locks nobody out.
 */
import { readFileSync, unwatchFile, watchFile } from "node:fs";
import type { Logger } from "pino";
import type { FieldIssue } from "./catalog/index.js";
import { type ApiToken, parseTokensText } from "./tokens.js";

/** A tokens file that cannot be used, with every problem in it. */
export class TokensFileError extends Error {
  override readonly name = "TokensFileError";
  constructor(
    readonly file: string,
    readonly issues: FieldIssue[],
  ) {
    super(issues.map((i) => `${file}: ${i.path ? `${i.path}: ` : ""}${i.message}`).join("\n"));
  }
}

/**
 * Reads and validates a tokens file; `extra` entries (the `--token` admin)
 * are checked with it for duplicate names and digests.
 */
export function readTokensFile(file: string, extra: readonly ApiToken[] = []): ApiToken[] {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    throw new TokensFileError(file, [{ path: "", message: `cannot read it: ${(err as Error).message}` }]);
  }
  const r = parseTokensText(text);
  if (!r.ok) throw new TokensFileError(file, r.issues);
  const issues: FieldIssue[] = [];
  for (const x of extra) {
    r.tokens.forEach((t, i) => {
      if (t.name === x.name) {
        issues.push({
          path: `[${i}].name`,
          message: `${x.name} is the name --token is recorded as; choose another`,
        });
      }
      if (t.sha256 === x.sha256) issues.push({ path: `[${i}].sha256`, message: "this is the --token token" });
    });
  }
  if (issues.length > 0) throw new TokensFileError(file, issues);
  return [...r.tokens, ...extra];
}

/**
 * Calls `apply` with the file's tokens (and `extra`) whenever the file
 * changes and still validates. Polls the file's status (every `intervalMs`),
 * which also sees a file replaced by rename, as editors and config
 * management do. Returns a function that stops watching.
 */
export function watchTokensFile(
  file: string,
  opts: { extra?: readonly ApiToken[]; logger: Logger; intervalMs?: number; apply(tokens: ApiToken[]): void },
): () => void {
  const listener = (cur: { mtimeMs: number; size: number; ino: number }, prev: typeof cur) => {
    if (cur.mtimeMs === prev.mtimeMs && cur.size === prev.size && cur.ino === prev.ino) return;
    try {
      const tokens = readTokensFile(file, opts.extra);
      opts.apply(tokens);
      opts.logger.info({ file, tokens: tokens.map((t) => `${t.name}:${t.role}`) }, "API tokens reloaded");
    } catch (err) {
      const issues = err instanceof TokensFileError ? err.issues : [{ path: "", message: String(err) }];
      opts.logger.error({ file, issues }, "the changed tokens file is invalid; the tokens in force stay");
    }
  };
  watchFile(file, { interval: opts.intervalMs ?? 1000, persistent: false }, listener);
  return () => unwatchFile(file, listener);
}
