/**
 * Record keys in sorted order, the order passes iterate records in (never
 * the order records were inserted). Pure, with a cache: see below.
 */
import { originOf } from "./fork.js";

/**
 * Sorted keys, per record container, with the insertion-ordered keys they
 * were sorted from. Rules sort the same big records (nodes, replicas) many
 * times a pass and the keys seldom change between passes: comparing the
 * keys in order is linear, sorting them is not. The array returned is
 * shared between callers: never modify it.
 */
const sortedKeyCache = new WeakMap<object, { keys: string[]; sorted: string[] }>();

export function sortedKeys(rec: Record<string, unknown>): string[] {
  const keys = Object.keys(rec);
  const origin = originOf(rec);
  for (const from of origin ? [rec, origin] : [rec]) {
    const c = sortedKeyCache.get(from);
    if (c && sameKeys(c.keys, keys)) {
      if (from !== rec) sortedKeyCache.set(rec, c);
      return c.sorted;
    }
  }
  const entry = { keys, sorted: [...keys].sort() };
  sortedKeyCache.set(rec, entry);
  // A fork's keys are its origin's until the pass adds or removes a record: the next pass forks the same origin.
  if (origin && sameKeys(Object.keys(origin), keys)) sortedKeyCache.set(origin, entry);
  return entry.sorted;
}

function sameKeys(a: readonly string[], b: readonly string[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
