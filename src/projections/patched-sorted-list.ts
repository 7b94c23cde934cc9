/**
 * A list sorted by key, kept across changes of the collection it is made
 * from. After a few changes the last sorted list is patched (a copy, each
 * changed key placed by binary search) rather than sorted again: one
 * member leaving a collection of 16,000 cost a sort of 16,000 keys (about
 * 3 ms) in the next pass that asked. A list once handed out is never
 * changed (callers hold it); a change makes a new one.
 *
 * Used for a record table's groups (sorted ids) and for the reconciler's
 * kept routing table (rows sorted by replica id).
 */

/** Changes patched one by one: more than this (or than a sixteenth of the list) and it is sorted again whole. */
const PATCH_LIMIT = 64;

export interface SortedSource<T> {
  /** The item of `key` as the collection has it now, or undefined when it is not in it. */
  current(key: string): T | undefined;
  /** Every item of the collection now, in any order. */
  all(): Iterable<T>;
  keyOf(item: T): string;
}

export class PatchedSortedList<T> {
  /** The sorted list as last handed out (null: sort again). */
  #sorted: T[] | null = null;
  /** Keys changed since `#sorted` was made. */
  #changed: string[] = [];

  constructor(private readonly source: SortedSource<T>) {}

  /** The item of `key` changed (added, removed or replaced) in the collection. */
  note(key: string): void {
    if (this.#sorted === null) return;
    if (this.#changed.length >= PATCH_LIMIT || this.#changed.length * 16 >= this.#sorted.length) {
      this.#sorted = null;
      this.#changed = [];
      return;
    }
    this.#changed.push(key);
  }

  /** The collection sorted by key (shared: never change it). */
  sorted(): readonly T[] {
    if (this.#sorted !== null) {
      if (this.#changed.length === 0) return this.#sorted;
      this.#sorted = this.#patched(this.#sorted);
    } else {
      const src = this.source;
      this.#sorted = [...src.all()].sort((a, b) => (src.keyOf(a) < src.keyOf(b) ? -1 : 1));
    }
    this.#changed = [];
    return this.#sorted;
  }

  /**
   * `sorted` with each changed key's item as the collection has it now, or
   * taken out (a copy): a key changed twice ends where the collection says.
   */
  #patched(sorted: readonly T[]): T[] {
    const src = this.source;
    const out = sorted.slice();
    for (const key of this.#changed) {
      let lo = 0;
      let hi = out.length;
      while (lo < hi) {
        const mid = (lo + hi) >>> 1;
        if (src.keyOf(out[mid] as T) < key) lo = mid + 1;
        else hi = mid;
      }
      const there = lo < out.length && src.keyOf(out[lo] as T) === key;
      const item = src.current(key);
      if (item === undefined) {
        if (there) out.splice(lo, 1);
      } else if (there) out[lo] = item;
      else out.splice(lo, 0, item);
    }
    return out;
  }
}
