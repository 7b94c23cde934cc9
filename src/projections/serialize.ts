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

/** What JSON leaves out of an object (and writes as null in an array). */
const OMITTED = Symbol("omitted");

/**
 * Whether `canonicalJson(a) === canonicalJson(b)`, without writing either
 * text: the replay-determinism rule compares two folds of a whole fleet at
 * every checkpoint, and building the two texts (and the sorted copies
 * before them) was most of that rule's time. It reads the values as
 * `canonicalJson` does — `toJSON` forms, own enumerable keys in any order,
 * a key whose value JSON leaves out (undefined, a function, a symbol) as
 * absent, such a value in an array and a number that is not finite as
 * null, −0 as 0 — and throws on a BigInt as it does.
 */
export function canonicallyEqual(a: unknown, b: unknown): boolean {
  return sameJson(jsonForm(a, false), jsonForm(b, false));
}

/** `v` as `canonicalJson` writes it at a place in an array (`inArray`) or an object. */
function jsonForm(v: unknown, inArray: boolean): unknown {
  switch (typeof v) {
    case "undefined":
    case "function":
    case "symbol":
      return inArray ? null : OMITTED;
    case "number":
      return Number.isFinite(v) ? v : null;
    case "bigint":
      throw new TypeError("Do not know how to serialize a BigInt");
    case "object": {
      if (v === null || Array.isArray(v)) return v;
      let out: unknown = v;
      while (out !== null && typeof out === "object" && !Array.isArray(out)) {
        const toJSON = (out as { toJSON?: unknown }).toJSON;
        if (typeof toJSON !== "function") break;
        out = toJSON.call(out);
      }
      return out === v ? v : jsonForm(out, inArray);
    }
    default:
      return v;
  }
}

/** Two values already in their JSON form (`jsonForm`). */
function sameJson(a: unknown, b: unknown): boolean {
  if (a === null || typeof a !== "object" || b === null || typeof b !== "object") return a === b;
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++)
      if (!sameJson(jsonForm(a[i], true), jsonForm(b[i], true))) return false;
    return true;
  }
  if (Array.isArray(b)) return false;
  const ra = a as Record<string, unknown>;
  const rb = b as Record<string, unknown>;
  let written = 0;
  for (const k of Object.keys(ra)) {
    // canonicalJson's copy assigns "__proto__", which sets the prototype: never a key of its text.
    if (k === "__proto__") continue;
    const va = jsonForm(ra[k], false);
    if (va === OMITTED) continue;
    written++;
    if (!Object.prototype.propertyIsEnumerable.call(rb, k)) return false;
    const vb = jsonForm(rb[k], false);
    if (vb === OMITTED || !sameJson(va, vb)) return false;
  }
  for (const k of Object.keys(rb)) if (k !== "__proto__" && jsonForm(rb[k], false) !== OMITTED) written--;
  return written === 0;
}
