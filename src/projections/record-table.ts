/**
 * The one owner of a big container's records (the nodes, the replicas): the
 * records themselves, their key lists, their group and lookup indexes, the
 * followers of their changes, and the journal of a reconcile pass's fork.
 * Everything derived from the records lives in the table's own fields, so
 * no write can miss an index: `put`, `drop` and `update` are the only
 * writers, and `get` hands out `Readonly<T>` (a write through it does not
 * compile). Readers that must not write at all (a reconcile pass's rules)
 * are given the table as a `TableView`, whose records are
 * `DeepReadonly<T>`: a record's nested objects and arrays (a replica's
 * shards, a node's GPUs) cannot be written through it either. The class
 * does not declare `implements TableView<T>`: for a generic `T` the
 * compiler cannot relate `Readonly<T>` to `DeepReadonly<T>`; each concrete
 * table is checked where it is handed over as a view (a `FleetState` passed
 * as a `FleetView`, and the type test).
 *
 * The JSON form is the records object alone (`toJSON`), keyed by id in the
 * order ids first appeared: a state with tables serializes byte for byte as
 * the plain records did.
 *
 * Key lists. With thousands of records a container is a dictionary-mode
 * object, and enumerating one (`Object.keys`, `Object.values`) sorts its
 * properties by insertion index every time: about 1–4 ms at 10,000 records,
 * and a pass enumerates the big containers a dozen times. So the table
 * keeps the keys in insertion order (what `Object.values` and JSON follow)
 * and sorted (the order passes iterate in): `sorted` is replaced, never
 * changed in place (callers may hold it), and keys added since it was last
 * sorted wait in `added`. A key that is an array index ("42") goes first in
 * `Object.keys` whatever the insertion order: a table holding one reads the
 * keys from the object instead.
 *
 * Indexes are declared when the table is made (`TableIndexes`), like a
 * controller's index fields, and built on first use: a replay that never
 * asks pays nothing for them. A write marks the record's id; an index
 * re-reads the marked records before it answers, so a key function reads
 * only its own record (and only fields the writers change).
 *
 * The fork. A reconcile pass folds its own decisions into a working copy of
 * the fleet as it goes (later rules see earlier ones' effect) and must give
 * the state back as it was. Copying the big containers cost most of a pass
 * that changes one record, so while forked (`fork` … `release`) the table
 * keeps a journal instead: the first write to each id saves what it held (a
 * copy of the content of a record changed in place, the record a new one
 * replaced, or that the id was absent), and `release` puts every saved
 * record back, its content restored into the very object readers held
 * before the pass, and the key order and key lists as they were. Records
 * are changed in place during the pass, so a rule holding a record read
 * before a unit was folded sees the unit's effect.
 */
import type { DeepReadonly } from "./deep-readonly.js";
import { PatchedSortedList } from "./patched-sorted-list.js";

/** A grouping of the records, declared with the table: the group a record is in, or null for none. */
export interface GroupIndex<T> {
  readonly name: string;
  /** Reads only the record. */
  keyOf(record: Readonly<T>): string | null;
}

/** A lookup from keys to the records naming them (several keys per record), declared with the table. */
export interface LookupIndex<T> {
  readonly name: string;
  /** Reads only the record. */
  keysOf(record: Readonly<T>): readonly string[];
}

/** The indexes a table keeps. */
export interface TableIndexes<T> {
  readonly groups?: readonly GroupIndex<T>[];
  readonly lookups?: readonly LookupIndex<T>[];
}

/** A group's record ids. */
export interface Group {
  readonly size: number;
  /** Sorted; shared between callers: never modify it. */
  ids(): readonly string[];
  /**
   * Changes when a record joins or leaves the group or a member is changed
   * (never repeats, across every table): a reader can tell that nothing in
   * the group changed since it last looked.
   */
  readonly version: number;
}

/**
 * What derived data other than the declared indexes reads to stay exact
 * (placement keeps its node views this way): the ids written since the last
 * `take`, each once, whatever wrote them (the fold, a fork and its
 * release). The first `take` gives the ids written since `followChanges`.
 */
export interface ChangeFollower {
  take(): ReadonlySet<string>;
  /** Stops following: the marks are no longer kept for it. */
  stop(): void;
}

/** What a reader may do with a table: read, records read-only all the way down. */
export interface TableView<T> {
  readonly size: number;
  has(id: string): boolean;
  get(id: string): DeepReadonly<T> | undefined;
  /** Ids in insertion order (the order of the JSON form): a copy. */
  keys(): readonly string[];
  /** Ids in sorted order. Shared: never modify it. */
  sortedKeys(): readonly string[];
  /** Records in insertion order. */
  values(): DeepReadonly<T>[];
  /** Records in id order. */
  sortedValues(): DeepReadonly<T>[];
  /** The groups of a declared group index. A group that lost its last member stays, empty. */
  groups(index: GroupIndex<T>): ReadonlyMap<string, Group>;
  /** The sorted ids of group `key` of a declared group index (none: empty). */
  groupIds(index: GroupIndex<T>, key: string): readonly string[];
  /** The first record, in insertion order, that a declared lookup index files under `key`, or "". */
  lookup(index: LookupIndex<T>, key: string): string;
  followChanges(): ChangeFollower;
  /** The records object: the table's JSON form. */
  toJSON(): Readonly<Record<string, DeepReadonly<T>>>;
}

/** One counter for every group of every table, so a version is never reused. */
let versions = 0;

class GroupSet implements Group {
  readonly members = new Set<string>();
  /** The sorted ids, patched after a few changes rather than sorted again. */
  readonly #sorted = new PatchedSortedList<string>({
    current: (id) => (this.members.has(id) ? id : undefined),
    all: () => this.members,
    keyOf: (id) => id,
  });
  version = ++versions;
  get size(): number {
    return this.members.size;
  }
  /** Sorted (shared: never change it). */
  ids(): readonly string[] {
    return this.#sorted.sorted();
  }
  add(id: string): void {
    this.members.add(id);
    this.#sorted.note(id);
    this.version = ++versions;
  }
  delete(id: string): void {
    this.members.delete(id);
    this.#sorted.note(id);
    this.version = ++versions;
  }
  touch(): void {
    this.version = ++versions;
  }
}

interface BuiltGroups<T> {
  index: GroupIndex<T>;
  /** Record id → its group. */
  groupOf: Map<string, string>;
  groups: Map<string, GroupSet>;
}

interface BuiltLookup<T> {
  index: LookupIndex<T>;
  /** Record id → the keys it is filed under. */
  keysOf: Map<string, readonly string[]>;
  ids: Map<string, Set<string>>;
}

/**
 * The key lists (see above); null while the table holds an array-index key.
 * A removed id leaves `keys`, `sorted` and `added` only when they are next
 * read (`compacted`): until then it is in `removed`. Taking it out at once
 * cost a search and a copy of both lists per removal, which a replay (a
 * replica removed every few events, the lists never read) paid for nothing.
 */
interface KeyLists {
  keys: string[];
  sorted: string[];
  added: string[];
  /** Ids removed and still in the lists; never an id of a record the table holds. */
  removed: Set<string>;
}

/** What an id held before the fork first wrote it. */
interface Saved<T> {
  /** The record then, or undefined when the id was absent. */
  record: T | undefined;
  /** A copy of that record's content, when the fork changed it in place. */
  content: T | undefined;
}

interface Journal<T> {
  saved: Map<string, Saved<T>>;
  /** The key lists before the fork first added or removed an id (undefined: not saved yet). */
  lists: KeyLists | null | undefined;
  /** The key order before the fork first removed an id, when it did. */
  order: string[] | undefined;
}

function isArrayIndex(key: string): boolean {
  return /^(0|[1-9]\d{0,9})$/.test(key) && Number(key) < 4_294_967_295;
}

/** The same keys in the same order. */
export function sameKeys(a: readonly string[], b: readonly string[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

export class RecordTable<T extends object> {
  /**
   * Without a prototype, so an id such as "constructor" is a record like any
   * other. Keyed in insertion order: the JSON form.
   */
  readonly #records: Record<string, T> = Object.create(null);
  #lists: KeyLists | null = { keys: [], sorted: [], added: [], removed: new Set() };
  readonly #declared: TableIndexes<T>;
  readonly #groups = new Map<GroupIndex<T>, BuiltGroups<T>>();
  readonly #lookups = new Map<LookupIndex<T>, BuiltLookup<T>>();
  readonly #followers = new Set<{ ids: Set<string> }>();
  /** Ids written since the built indexes and the followers last read them. */
  readonly #dirty = new Set<string>();
  #journal: Journal<T> | null = null;

  /** A table of `records` (their key order kept), keeping the indexes `indexes` declares. */
  constructor(indexes: TableIndexes<T> = {}, records?: Readonly<Record<string, T>>) {
    this.#declared = indexes;
    if (records) for (const id of Object.keys(records)) this.#records[id] = records[id] as T;
    this.#lists = this.#listsFromRecords();
  }

  /** The indexes this table was declared with (a copy of the table keeps them). */
  get indexes(): TableIndexes<T> {
    return this.#declared;
  }

  // ------------------------------------------------------------------ reads

  get size(): number {
    return this.#lists
      ? this.#lists.keys.length - this.#lists.removed.size
      : Object.keys(this.#records).length;
  }

  has(id: string): boolean {
    return this.#records[id] !== undefined;
  }

  get(id: string): Readonly<T> | undefined {
    return this.#records[id];
  }

  keys(): readonly string[] {
    return this.#keyList().slice();
  }

  /** The insertion-ordered ids, the table's own array (changed by the writers). */
  #keyList(): readonly string[] {
    return this.#lists ? compacted(this.#lists).keys : Object.keys(this.#records);
  }

  sortedKeys(): readonly string[] {
    return this.#lists ? merged(this.#lists) : Object.keys(this.#records).sort();
  }

  values(): Readonly<T>[] {
    const keys = this.#keyList();
    const out = new Array<T>(keys.length);
    for (let i = 0; i < keys.length; i++) out[i] = this.#records[keys[i] as string] as T;
    return out;
  }

  sortedValues(): Readonly<T>[] {
    const keys = this.sortedKeys();
    const out = new Array<T>(keys.length);
    for (let i = 0; i < keys.length; i++) out[i] = this.#records[keys[i] as string] as T;
    return out;
  }

  groups(index: GroupIndex<T>): ReadonlyMap<string, Group> {
    this.#refresh();
    let built = this.#groups.get(index);
    if (!built) {
      if (!this.#declared.groups?.includes(index))
        throw new Error(`group index ${index.name} was not declared with this table`);
      built = { index, groupOf: new Map(), groups: new Map() };
      for (const id of this.#keyList()) placeInGroup(built, id, this.#records[id] as T);
      this.#groups.set(index, built);
    }
    return built.groups;
  }

  groupIds(index: GroupIndex<T>, key: string): readonly string[] {
    return this.groups(index).get(key)?.ids() ?? [];
  }

  lookup(index: LookupIndex<T>, key: string): string {
    this.#refresh();
    let built = this.#lookups.get(index);
    if (!built) {
      if (!this.#declared.lookups?.includes(index))
        throw new Error(`lookup index ${index.name} was not declared with this table`);
      built = { index, keysOf: new Map(), ids: new Map() };
      for (const id of this.#keyList()) fileUnder(built, id, this.#records[id] as T);
      this.#lookups.set(index, built);
    }
    const found = built.ids.get(key);
    if (found === undefined || found.size === 0) return "";
    if (found.size === 1) return found.values().next().value as string;
    // Several records name the key: the first in insertion order, as a scan would find it.
    for (const id of this.#keyList()) if (found.has(id)) return id;
    return "";
  }

  followChanges(): ChangeFollower {
    this.#refresh();
    const f = { ids: new Set<string>() };
    this.#followers.add(f);
    return {
      take: () => {
        this.#refresh();
        const taken = f.ids;
        f.ids = new Set();
        return taken;
      },
      stop: () => {
        this.#followers.delete(f);
      },
    };
  }

  toJSON(): Readonly<Record<string, Readonly<T>>> {
    return this.#records;
  }

  // ---------------------------------------------------------------- writers

  /** Adds or replaces the record under `id`. */
  put(id: string, record: T): void {
    const isNew = this.#records[id] === undefined;
    this.#beforeKeyChange(id, false);
    this.#records[id] = record;
    this.#mark(id);
    if (!isNew || !this.#lists) return;
    if (isArrayIndex(id)) {
      this.#lists = null;
      return;
    }
    // Put back after its removal: at the end of the insertion order, as the records have it.
    if (this.#lists.removed.has(id)) compacted(this.#lists);
    this.#lists.keys.push(id);
    this.#lists.added.push(id);
  }

  /** Removes the record under `id`, if any. */
  drop(id: string): void {
    if (this.#records[id] === undefined) return;
    this.#beforeKeyChange(id, true);
    delete this.#records[id];
    this.#mark(id);
    const t = this.#lists;
    if (!t) {
      this.#lists = this.#listsFromRecords();
      return;
    }
    t.removed.add(id);
  }

  /**
   * Changes the record under `id` in place through `change`, and gives what
   * `change` returns (undefined, without calling it, when there is none).
   */
  update<R>(id: string, change: (record: T) => R): R | undefined {
    const v = this.#records[id];
    if (v === undefined) return undefined;
    const j = this.#journal;
    if (j !== null && !j.saved.has(id)) j.saved.set(id, { record: v, content: structuredClone(v) });
    try {
      return change(v);
    } finally {
      // Marked after the change: an index read inside `change` may have re-read it half changed.
      this.#mark(id);
    }
  }

  // ------------------------------------------------------------------- fork

  /**
   * The table behind `view`, forked: the one way from a reader's view to a
   * writable table, whose writes `release` gives back (a reconcile pass's
   * working copy, projections/fork.ts).
   */
  static fork<T extends object>(view: TableView<T>): RecordTable<T> {
    if (!(view instanceof RecordTable)) throw new TypeError("only a RecordTable can be forked");
    view.fork();
    return view as RecordTable<T>;
  }

  /** Starts journaling every write, until `release` gives the table back as it is now. */
  fork(): void {
    if (this.#journal !== null) throw new Error("the table is already forked: release it first");
    this.#journal = { saved: new Map(), lists: undefined, order: undefined };
  }

  /** Puts back everything written since `fork`: records, their content, key order, key lists. */
  release(): void {
    const j = this.#journal;
    if (j === null) return;
    this.#journal = null;
    const rec = this.#records;
    for (const [id, s] of j.saved) {
      if (s.record === undefined) delete rec[id];
      else {
        if (s.content !== undefined) restoreContent(s.record, s.content);
        rec[id] = s.record;
      }
      this.#mark(id);
    }
    // A record removed and put back went to the end: every key back in its place.
    if (j.order) {
      for (const k of j.order) {
        const v = rec[k] as T;
        delete rec[k];
        rec[k] = v;
      }
    }
    if (j.lists !== undefined) this.#lists = j.lists;
  }

  // --------------------------------------------------------------- internal

  #listsFromRecords(): KeyLists | null {
    const keys = Object.keys(this.#records);
    if (keys.some(isArrayIndex)) return null;
    return { keys, sorted: [...keys].sort(), added: [], removed: new Set() };
  }

  #beforeKeyChange(id: string, removing: boolean): void {
    const j = this.#journal;
    if (j === null) return;
    const rec = this.#records;
    if (j.lists === undefined)
      j.lists = this.#lists && {
        keys: compacted(this.#lists).keys.slice(),
        sorted: merged(this.#lists),
        added: [],
        removed: new Set(),
      };
    if (removing && j.order === undefined) {
      // The order before the fork: ids it added went to the end, so they are left out.
      j.order = Object.keys(rec).filter((k) => {
        const s = j.saved.get(k);
        return s === undefined || s.record !== undefined;
      });
    }
    if (j.saved.has(id)) return;
    // A record replaced or removed is not changed after: kept as it is.
    j.saved.set(id, { record: rec[id], content: undefined });
  }

  #mark(id: string): void {
    if (this.#groups.size > 0 || this.#lookups.size > 0 || this.#followers.size > 0) this.#dirty.add(id);
  }

  /**
   * Re-reads the marked records into the built indexes and the followers. A
   * full placement marks every replica twice (created, then placed), so
   * each id is read once, moved between groups with one map write, and the
   * loops run over arrays (an iterator per record otherwise).
   */
  #refresh(): void {
    if (this.#dirty.size === 0) return;
    const followers = [...this.#followers];
    const groups = [...this.#groups.values()];
    const lookups = [...this.#lookups.values()];
    for (const id of this.#dirty) {
      for (let i = 0; i < followers.length; i++) (followers[i] as { ids: Set<string> }).ids.add(id);
      const v = this.#records[id];
      for (let i = 0; i < groups.length; i++) {
        const g = groups[i] as BuiltGroups<T>;
        const was = g.groupOf.get(id);
        const now = v === undefined ? null : g.index.keyOf(v);
        if (was === now) {
          (g.groups.get(was) as GroupSet).touch();
          continue;
        }
        // An empty group is kept: its version still says that it changed.
        if (was !== undefined) (g.groups.get(was) as GroupSet).delete(id);
        if (now === null) g.groupOf.delete(id);
        else join(g, id, now);
      }
      for (let i = 0; i < lookups.length; i++) {
        const l = lookups[i] as BuiltLookup<T>;
        const now = v === undefined ? NO_KEYS : l.index.keysOf(v);
        // Most writes leave a record's keys as they were (a status, a load): nothing to move.
        if (sameKeys(l.keysOf.get(id) ?? NO_KEYS, now)) continue;
        unfile(l, id);
        fileKeys(l, id, now);
      }
    }
    this.#dirty.clear();
  }

  /**
   * Throws unless every declared index (groups and lookups, built now if
   * they were not) and the key lists answer what a rebuild from the records
   * would: for tests, to catch a write that went around the table.
   */
  verify(): void {
    for (const g of this.#declared.groups ?? []) this.groups(g);
    for (const l of this.#declared.lookups ?? []) this.lookup(l, "");
    this.#refresh();
    const ids = Object.keys(this.#records);
    if (this.#lists) {
      if (!sameKeys(compacted(this.#lists).keys, ids))
        throw new Error("the insertion-ordered key list is stale");
      if (!sameKeys(merged(this.#lists), [...ids].sort())) throw new Error("the sorted key list is stale");
    }
    for (const built of this.#groups.values()) {
      const fresh: BuiltGroups<T> = { index: built.index, groupOf: new Map(), groups: new Map() };
      for (const id of ids) placeInGroup(fresh, id, this.#records[id] as T);
      compare(built.index.name, [...built.groupOf], [...fresh.groupOf]);
      for (const [key, g] of built.groups)
        if (!sameKeys(g.ids(), [...g.members].sort()))
          throw new Error(`group ${JSON.stringify(key)} of ${built.index.name}: its sorted ids are stale`);
    }
    for (const built of this.#lookups.values()) {
      const fresh: BuiltLookup<T> = { index: built.index, keysOf: new Map(), ids: new Map() };
      for (const id of ids) fileUnder(fresh, id, this.#records[id] as T);
      const entries = (l: BuiltLookup<T>) =>
        [...l.ids].filter(([, s]) => s.size > 0).map(([k, s]) => [k, [...s].sort().join(",")] as const);
      compare(built.index.name, entries(built), entries(fresh));
    }
  }
}

function compare(
  name: string,
  have: (readonly [string, string])[],
  want: (readonly [string, string])[],
): void {
  const a = have
    .map((e) => e.join("="))
    .sort()
    .join("\n");
  const b = want
    .map((e) => e.join("="))
    .sort()
    .join("\n");
  if (a !== b)
    throw new Error(
      `index ${name} is stale: it holds\n${a.slice(0, 400)}\nbut the records give\n${b.slice(0, 400)}`,
    );
}

/**
 * The lists without the ids removed since they were last read. `sorted` is
 * a new array (callers may hold the old one); `keys` and `added` are the
 * table's own.
 */
function compacted(t: KeyLists): KeyLists {
  if (t.removed.size === 0) return t;
  const gone = t.removed;
  const keep = (k: string) => !gone.has(k);
  t.keys = t.keys.filter(keep);
  t.sorted = t.sorted.filter(keep);
  t.added = t.added.filter(keep);
  t.removed = new Set();
  return t;
}

/** The sorted keys, the keys added since merged in. */
function merged(t: KeyLists): string[] {
  compacted(t);
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

function placeInGroup<T>(built: BuiltGroups<T>, id: string, v: T): void {
  const key = built.index.keyOf(v);
  if (key !== null) join(built, id, key);
}

/** Puts record `id` in group `key` (its group in `groupOf` replaced, if any). */
function join<T>(built: BuiltGroups<T>, id: string, key: string): void {
  let g = built.groups.get(key);
  if (!g) {
    g = new GroupSet();
    built.groups.set(key, g);
  }
  g.add(id);
  built.groupOf.set(id, key);
}

const NO_KEYS: readonly string[] = [];

function fileUnder<T>(built: BuiltLookup<T>, id: string, v: T): void {
  fileKeys(built, id, built.index.keysOf(v));
}

function fileKeys<T>(built: BuiltLookup<T>, id: string, keys: readonly string[]): void {
  if (keys.length === 0) return;
  built.keysOf.set(id, keys);
  for (const k of keys) {
    let ids = built.ids.get(k);
    if (!ids) {
      ids = new Set();
      built.ids.set(k, ids);
    }
    ids.add(id);
  }
}

function unfile<T>(built: BuiltLookup<T>, id: string): void {
  const keys = built.keysOf.get(id);
  if (keys === undefined) return;
  built.keysOf.delete(id);
  for (const k of keys) {
    const ids = built.ids.get(k);
    if (!ids) continue;
    ids.delete(id);
    if (ids.size === 0) built.ids.delete(k);
  }
}

/**
 * Gives `record` back the content it had (`content`, a copy taken before
 * the fork changed it), keeping the object: whoever held it before the
 * pass holds it unchanged after. Its key order is kept too (the JSON form).
 */
function restoreContent<T extends object>(record: T, content: T): void {
  const r = record as Record<string, unknown>;
  const c = content as Record<string, unknown>;
  const keys = Object.keys(c);
  if (!sameKeys(Object.keys(r), keys)) for (const k of Object.keys(r)) delete r[k];
  for (const k of keys) r[k] = c[k];
}
