/**
 * Runs `work` over `items` with at most `limit` at a time, the answers in the
 * items' order: independent child processes (CLI runs) side by side, without
 * starting so many at once on a small machine that each one's startup
 * crawls past its timeout.
 */
export async function sideBySide<T, R>(
  items: readonly T[],
  work: (item: T, index: number) => Promise<R>,
  limit = 4,
): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const i = next++;
      out[i] = await work(items[i] as T, i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}
