/**
 * A record as a reader sees it: read-only all the way down, so a nested
 * object or array of a record (a replica's shards, a node's GPUs) cannot be
 * written through a view either. A type only: views hand out the records
 * themselves, nothing is copied or frozen.
 */
export type DeepReadonly<T> = T extends (...args: never[]) => unknown
  ? T
  : T extends ReadonlyMap<infer K, infer V>
    ? ReadonlyMap<K, DeepReadonly<V>>
    : T extends ReadonlySet<infer V>
      ? ReadonlySet<V>
      : T extends readonly (infer E)[]
        ? readonly DeepReadonly<E>[]
        : T extends object
          ? { readonly [K in keyof T]: DeepReadonly<T[K]> }
          : T;
