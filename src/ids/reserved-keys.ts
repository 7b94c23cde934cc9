/**
 * Names every plain JavaScript object answers to (`constructor`,
 * `__proto__`, `toString`…). Ids become keys of the projected state's maps;
 * one of these as a key would read (or write) the object's prototype
 * instead of an entry, so no id may be one.
 *
 * A set of them, not `id in Object.prototype`: the folds check every id of
 * every event, and `in` with a string just decoded from the wire costs
 * ~0.4 µs (the engine interns the string first), a set lookup a tenth.
 */
const RESERVED: ReadonlySet<string> = new Set(Object.getOwnPropertyNames(Object.prototype));

/**
 * Their lengths and first characters: most ids differ from every one of
 * them in these, which are read without hashing the id (the set lookup
 * hashes the whole string, and an id just decoded has no hash yet).
 */
const LENGTHS: ReadonlySet<number> = new Set([...RESERVED].map((k) => k.length));
const FIRST_CHARS: ReadonlySet<number> = new Set([...RESERVED].map((k) => k.charCodeAt(0)));

export function isReservedKey(id: string): boolean {
  return LENGTHS.has(id.length) && FIRST_CHARS.has(id.charCodeAt(0)) && RESERVED.has(id);
}
