/**
 * Reads the reconciler's config file (YAML or JSON; JSON is YAML) and
 * validates it with the config schema. Errors name the file and the field,
 * so an operator knows what to fix.
 */
import { readFile } from "node:fs/promises";
import { parse } from "yaml";
import type { z } from "zod";

export class ConfigFileError extends Error {
  override readonly name = "ConfigFileError";
}

/** Parses `text` (from `file`, for messages) with `schema`; `overrides` win over the file. */
export function parseConfig<S extends z.ZodType>(
  schema: S,
  text: string | undefined,
  file: string,
  overrides: Record<string, unknown> = {},
): z.output<S> {
  let raw: unknown = {};
  if (text !== undefined) {
    try {
      raw = parse(text) ?? {};
    } catch (err) {
      throw new ConfigFileError(`${file}: not valid YAML or JSON: ${(err as Error).message}`);
    }
  }
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) {
    throw new ConfigFileError(
      `${file}: the reconciler config must be a mapping of fields, got ${typeof raw}`,
    );
  }
  const result = schema.safeParse({ ...raw, ...overrides });
  if (!result.success) {
    const problems = result.error.issues
      .map((i) => `${i.path.length > 0 ? i.path.join(".") : "(top level)"}: ${i.message}`)
      .join("; ");
    throw new ConfigFileError(`${file}: invalid reconciler config: ${problems}`);
  }
  return result.data;
}

export async function loadConfigFile<S extends z.ZodType>(
  schema: S,
  file: string | undefined,
  overrides: Record<string, unknown> = {},
): Promise<z.output<S>> {
  let text: string | undefined;
  if (file !== undefined) {
    try {
      text = await readFile(file, "utf8");
    } catch (err) {
      throw new ConfigFileError(`cannot read the config file ${file}: ${(err as Error).message}`);
    }
  }
  return parseConfig(schema, text, file ?? "config", overrides);
}
