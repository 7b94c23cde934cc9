/**
 * Names every plain JavaScript object answers to (`constructor`,
 * `__proto__`, `toString`…). Ids become keys of the projected state's maps;
 * one of these as a key would read (or write) the object's prototype
 * instead of an entry, so no id may be one.
 */
export function isReservedKey(id: string): boolean {
  return id in Object.prototype;
}
