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

export function isReservedKey(id: string): boolean {
  return RESERVED.has(id);
}
