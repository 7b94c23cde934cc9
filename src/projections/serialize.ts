/**
 * Canonical JSON of projected state: keys of every object sorted, so equal
 * states give byte-identical text whatever order they were built in. An
 * object with a JSON form of its own (a `RecordTable`) is written as that
 * form, as `JSON.stringify` would.
 */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(sortKeys(value));
}

function sortKeys(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(sortKeys);
  if (v !== null && typeof v === "object") {
    if (typeof (v as { toJSON?: unknown }).toJSON === "function")
      return sortKeys((v as { toJSON(): unknown }).toJSON());
    const out: Record<string, unknown> = {};
    for (const k of Object.keys(v).sort()) out[k] = sortKeys((v as Record<string, unknown>)[k]);
    return out;
  }
  return v;
}
