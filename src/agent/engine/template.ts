/** Engine command and URL templates: `{name}` placeholders filled per shard. Pure. */

export const PLACEHOLDERS = [
  "model",
  "port",
  "gpu_count",
  "gpu_indices",
  "gpu_uuids",
  "rank",
  "world_size",
  "master_addr",
  "master_port",
  "shard_id",
  "replica_id",
] as const;

export type Placeholder = (typeof PLACEHOLDERS)[number];
export type TemplateValues = Record<Placeholder, string>;

const KNOWN: ReadonlySet<string> = new Set(PLACEHOLDERS);

export function unknownPlaceholders(template: string): string[] {
  return [...template.matchAll(/\{([^{}]*)\}/g)].map((m) => m[1]!).filter((n) => !KNOWN.has(n));
}

/** Fills one argv element or URL; no shell is involved, so values need no quoting. */
export function fill(template: string, values: TemplateValues): string {
  return template.replace(/\{([a-z_]+)\}/g, (whole, name: string) =>
    KNOWN.has(name) ? values[name as Placeholder] : whole,
  );
}
