/**
 * An async iterator that can also hand its next result to two callbacks,
 * without a promise per value. A reader that waits seconds for each value
 * (an agent stream between heartbeats) otherwise keeps a promise and its
 * reaction alive per stream for that long, long enough to be copied by
 * young-generation collections and promoted.
 */
export interface CallbackIterator<T> extends AsyncIterator<T> {
  /** Calls exactly one of the callbacks once, with what `next()` would have settled with (possibly at once). */
  readInto(onResult: (r: IteratorResult<T>) => void, onError: (err: unknown) => void): void;
  /**
   * The next value if one is already waiting (what `next()` would settle
   * with at once), else undefined; an end or a failure is left to the reads.
   */
  takeWaiting?(): T | undefined;
}

/** `it`'s next value if it says one is already waiting; undefined when none is, or it cannot say. */
export function takeWaiting<T>(it: AsyncIterator<T>): T | undefined {
  return (it as Partial<CallbackIterator<T>>).takeWaiting?.();
}

/** Hands `it`'s next result to the callbacks: directly when it can, else through `next()`. */
export function readInto<T>(
  it: AsyncIterator<T>,
  onResult: (r: IteratorResult<T>) => void,
  onError: (err: unknown) => void,
): void {
  const direct = (it as Partial<CallbackIterator<T>>).readInto;
  if (typeof direct === "function") direct.call(it, onResult, onError);
  else it.next().then(onResult, onError);
}
