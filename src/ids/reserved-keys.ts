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
 * hashes the whole string, and an id just decoded has no hash yet). Kept
 * as flags indexed by the number: an array read, where a set of numbers
 * hashes it (the folds ask for several ids of every event).
 */
const LENGTHS = flags([...RESERVED].map((k) => k.length));
const FIRST_CHARS = flags([...RESERVED].map((k) => k.charCodeAt(0)));

function flags(numbers: number[]): Uint8Array {
  const out = new Uint8Array(Math.max(...numbers) + 1);
  for (const n of numbers) out[n] = 1;
  return out;
}

export function isReservedKey(id: string): boolean {
  // Out of range reads undefined: not reserved.
  return LENGTHS[id.length] === 1 && FIRST_CHARS[id.charCodeAt(0)] === 1 && RESERVED.has(id);
}
