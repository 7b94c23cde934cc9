/**
 * Record keys in sorted order, the order passes iterate records in (never
 * the order records were inserted), and record values in the order
 * `Object.values` gives them. Pure, with caches: see below.
 */
import { beforeKeyChange, originOf } from "./fork.js";
import { markChanged } from "./record-index.js";

/**
 * The key lists of a container whose records the fold adds and deletes
 * only through `putRecord` / `dropRecord` (the nodes and the replicas).
 *
 * Why: with thousands of records, a container is a dictionary-mode object,
 * and enumerating one (`Object.keys`, `Object.values`, `for … in`) sorts
 * its properties by insertion index every time: about 1–4 ms at 10,000
 * records, and a pass enumerates the big containers a dozen times. Reading
 * the values through a kept key list costs a tenth of that. The fold is
 * the only writer of these containers, so it keeps the lists exact:
 * `keys` in insertion order (what `Object.values` follows), `sorted`
 * replaced (never changed in place: callers may hold it) when keys come or
 * go, keys added since it was last sorted waiting in `added`.
 */
interface Tracked {
  keys: string[];
  sorted: string[];
  added: string[];
}

const tracked = new WeakMap<object, Tracked>();

/**
 * Containers that can never be tracked: one holding an array-index key
 * ("42"), which `Object.keys` lists before every other key whatever the
 * insertion order.
 */
const untrackable = new WeakSet<object>();

function isArrayIndex(key: string): boolean {
  return /^(0|[1-9]\d{0,9})$/.test(key) && Number(key) < 4_294_967_295;
}

/** Starts tracking `rec` from its current keys (the fold's first add to it, a fork of a tracked one). */
function track(rec: Record<string, unknown>): void {
  if (untrackable.has(rec)) return;
  const keys = Object.keys(rec);
  if (keys.some(isArrayIndex)) {
    untrackable.add(rec);
    return;
  }
  tracked.set(rec, { keys, sorted: [...keys].sort(), added: [] });
}

/** `rec[key] = value`, keeping a tracked container's key lists: the fold's only way to add a node or a replica. */
export function putRecord<T>(rec: Record<string, T>, key: string, value: T): void {
  beforeKeyChange(rec, key, false);
  const isNew = !Object.hasOwn(rec, key);
  rec[key] = value;
  markChanged(rec, key);
  if (!isNew) return;
  const t = tracked.get(rec);
  if (!t) {
    track(rec);
    return;
  }
  if (isArrayIndex(key)) {
    tracked.delete(rec);
    untrackable.add(rec);
    return;
  }
  t.keys.push(key);
  t.added.push(key);
}

/** `delete rec[key]`, keeping a tracked container's key lists: the fold's only way to remove a node or a replica. */
export function dropRecord<T>(rec: Record<string, T>, key: string): void {
  if (!Object.hasOwn(rec, key)) return;
  beforeKeyChange(rec, key, true);
  delete rec[key];
  markChanged(rec, key);
  const t = tracked.get(rec);
  if (!t) return;
  t.keys.splice(t.keys.indexOf(key), 1);
  const a = t.added.indexOf(key);
  if (a >= 0) t.added.splice(a, 1);
  else {
    // A new array: callers may hold the old one.
    const i = t.sorted.indexOf(key);
    if (i >= 0) t.sorted = t.sorted.toSpliced(i, 1);
  }
}

/** A tracked container's key lists as they are now (null: not tracked), for a fork to restore. */
export type KeyLists = Tracked | null;

export function saveKeyLists(rec: Record<string, unknown>): KeyLists {
  const t = tracked.get(rec);
  if (!t) return null;
  // The sorted array is never changed in place: shared.
  return { keys: t.keys.slice(), sorted: merged(t), added: [] };
}

export function restoreKeyLists(rec: Record<string, unknown>, lists: KeyLists): void {
  if (lists) tracked.set(rec, lists);
  else tracked.delete(rec);
}

/** The sorted keys of a tracked container, the keys added since merged in. */
function merged(t: Tracked): string[] {
  if (t.added.length === 0) return t.sorted;
  const added = t.added.sort();
  t.added = [];
  const out = new Array<string>(t.sorted.length + added.length);
  let i = 0;
  let j = 0;
  let k = 0;
  while (i < t.sorted.length && j < added.length) {
    out[k++] =
      (t.sorted[i] as string) < (added[j] as string) ? (t.sorted[i++] as string) : (added[j++] as string);
  }
  while (i < t.sorted.length) out[k++] = t.sorted[i++] as string;
  while (j < added.length) out[k++] = added[j++] as string;
  t.sorted = out;
  return out;
}

/**
 * Sorted keys of containers the fold does not track, with the
 * insertion-ordered keys they were sorted from: comparing the keys in
 * order is linear, sorting them is not.
 */
const sortedKeyCache = new WeakMap<object, { keys: string[]; sorted: string[] }>();

/** The keys of `rec` in sorted order. The array returned is shared between callers: never modify it. */
export function sortedKeys(rec: Record<string, unknown>): string[] {
  const t = tracked.get(rec);
  if (t) return merged(t);
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

/** `Object.values(rec)`: the same values in the same order, cheaper for a tracked container. */
export function recordValues<T>(rec: Record<string, T>): T[] {
  const t = tracked.get(rec);
  if (!t) return Object.values(rec);
  const out = new Array<T>(t.keys.length);
  for (let i = 0; i < t.keys.length; i++) out[i] = rec[t.keys[i] as string] as T;
  return out;
}

/** The same keys in the same order. */
export function sameKeys(a: readonly string[], b: readonly string[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
