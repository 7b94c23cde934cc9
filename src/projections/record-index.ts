/**
 * Indexes of the nodes and the replicas, kept across events and passes, so
 * that a reconcile pass reads the few records that matter instead of every
 * record. At 10,000 nodes a rule that looks at every replica costs 1–10 ms
 * (the records are scattered in memory: reading one field of each is a
 * cache miss each), and a pass has a dozen rules.
 *
 * An index groups a container's records by a key function (`null`: in no
 * group). Like the shard owners it is derived data, kept beside the
 * container (keyed by that object), never in the state: snapshots and the
 * serialized state do not change, and a container loaded from a snapshot
 * or copied builds its indexes on first use.
 *
 * How it stays exact: the fold changes a node or a replica only after
 * fetching it with `writable`, and adds, replaces or removes one only with
 * `putRecord` / `dropRecord`; a pass's fork, when released, puts records
 * back the same way (fork.ts). Each of those marks the record's id, and an
 * index re-reads the marked records before it answers. So a key function
 * reads only its own record, and only fields the fold changes that way
 * (not a shard's load, which the fold updates on its own). Derived data
 * that is not a grouping follows the same marks (`followChanges`).
 */

/** The group a record is in, or null for none. Reads only the record. */
export type GroupKey<T> = (record: T) => string | null;

/** A group's record ids. */
export interface Group {
  readonly size: number;
  /** Sorted; shared between callers: never modify it. */
  ids(): readonly string[];
  /**
   * Changes when a record joins or leaves the group or a member is changed
   * (never repeats, across every index): a reader can tell that nothing in
   * the group changed since it last looked.
   */
  readonly version: number;
}

/** One counter for every group of every index, so a version is never reused. */
let versions = 0;

class GroupSet implements Group {
  readonly members = new Set<string>();
  #sorted: string[] | null = null;
  version = ++versions;
  get size(): number {
    return this.members.size;
  }
  ids(): readonly string[] {
    this.#sorted ??= [...this.members].sort();
    return this.#sorted;
  }
  add(id: string): void {
    this.members.add(id);
    this.#sorted = null;
    this.version = ++versions;
  }
  delete(id: string): void {
    this.members.delete(id);
    this.#sorted = null;
    this.version = ++versions;
  }
  touch(): void {
    this.version = ++versions;
  }
}

interface Index {
  keyOf: GroupKey<unknown>;
  /** Record id → its group. */
  groupOf: Map<string, string>;
  groups: Map<string, GroupSet>;
}

interface Watch {
  /** Ids changed since the indexes last read them. */
  dirty: Set<string>;
  indexes: Map<GroupKey<unknown>, Index>;
  /** What each follower has not taken yet (followChanges). */
  followers: Set<{ ids: Set<string> }>;
}

const watches = new WeakMap<object, Watch>();

/** Marks `rec[id]` as changed (added, replaced, removed or about to be changed in place). */
export function markChanged(rec: object, id: string): void {
  const w = watches.get(rec);
  if (w !== undefined) w.dirty.add(id);
}

/**
 * The groups of `rec`'s records under `keyOf` (a function kept for good: it
 * names the index). A group that lost its last member stays, empty.
 */
export function groupsOf<T>(rec: Record<string, T>, keyOf: GroupKey<T>): ReadonlyMap<string, Group> {
  const w = watchOf(rec);
  let index = w.indexes.get(keyOf as GroupKey<unknown>);
  if (!index) {
    index = { keyOf: keyOf as GroupKey<unknown>, groupOf: new Map(), groups: new Map() };
    for (const id in rec) place(index, id, rec[id]);
    w.indexes.set(keyOf as GroupKey<unknown>, index);
  }
  return index.groups;
}

function watchOf(rec: Record<string, unknown>): Watch {
  let w = watches.get(rec);
  if (!w) {
    w = { dirty: new Set(), indexes: new Map(), followers: new Set() };
    watches.set(rec, w);
  } else if (w.dirty.size > 0) refresh(rec, w);
  return w;
}

/**
 * What derived data other than groups reads to stay exact (placement keeps
 * its node views this way): the ids of `rec` marked changed since the last
 * `take`, each once, whatever changed them (the fold, a fork and its
 * release). The first `take` gives the ids marked since `followChanges`.
 */
export interface ChangeFollower {
  take(): ReadonlySet<string>;
  /** Stops following: the marks are no longer kept for it. */
  stop(): void;
}

/** A new follower of `rec`'s change marks (see ChangeFollower). */
export function followChanges(rec: Record<string, unknown>): ChangeFollower {
  const w = watchOf(rec);
  const f = { ids: new Set<string>() };
  w.followers.add(f);
  return {
    take() {
      if (w.dirty.size > 0) refresh(rec, w);
      const taken = f.ids;
      f.ids = new Set();
      return taken;
    },
    stop() {
      w.followers.delete(f);
    },
  };
}

/** The sorted ids of the records in group `key` (none: empty). */
export function groupIds<T>(rec: Record<string, T>, keyOf: GroupKey<T>, key: string): readonly string[] {
  return groupsOf(rec, keyOf).get(key)?.ids() ?? [];
}

/**
 * Re-reads the marked records. A full placement marks every replica twice
 * (created, then placed), so this reads each key once and moves a record
 * between groups with one map write (a delete and a set grew and rehashed
 * the maps), and loops over arrays (an iterator per record otherwise).
 */
function refresh(rec: Record<string, unknown>, w: Watch): void {
  const followers = [...w.followers];
  const indexes = [...w.indexes.values()];
  for (const id of w.dirty) {
    for (let i = 0; i < followers.length; i++) (followers[i] as { ids: Set<string> }).ids.add(id);
    const v = rec[id];
    for (let i = 0; i < indexes.length; i++) {
      const index = indexes[i] as Index;
      const was = index.groupOf.get(id);
      const now = v === undefined ? null : index.keyOf(v);
      if (was === now) {
        (index.groups.get(was) as GroupSet).touch();
        continue;
      }
      // An empty group is kept: its version still says that it changed.
      if (was !== undefined) (index.groups.get(was) as GroupSet).delete(id);
      if (now === null) index.groupOf.delete(id);
      else join(index, id, now);
    }
  }
  w.dirty.clear();
}

function place(index: Index, id: string, v: unknown): void {
  if (v === undefined) return;
  const key = index.keyOf(v);
  if (key !== null) join(index, id, key);
}

/** Puts record `id` in group `key` (its group in `groupOf` replaced, if any). */
function join(index: Index, id: string, key: string): void {
  let g = index.groups.get(key);
  if (!g) {
    g = new GroupSet();
    index.groups.set(key, g);
  }
  g.add(id);
  index.groupOf.set(id, key);
}

/**
 * Throws unless every index of `rec` answers what a rebuild from its
 * records would: for tests, to catch a change the fold made without
 * marking it.
 */
export function verifyIndexes(rec: Record<string, unknown>): void {
  const w = watches.get(rec);
  if (!w) return;
  if (w.dirty.size > 0) refresh(rec, w);
  for (const index of w.indexes.values()) {
    const fresh: Index = { keyOf: index.keyOf, groupOf: new Map(), groups: new Map() };
    for (const id in rec) place(fresh, id, rec[id]);
    const have = [...index.groupOf].sort().join("\n");
    const want = [...fresh.groupOf].sort().join("\n");
    if (have !== want) {
      const name = index.keyOf.name || "an index";
      throw new Error(
        `${name} is stale: it holds\n${have.slice(0, 400)}\nbut the records give\n${want.slice(0, 400)}`,
      );
    }
  }
}
