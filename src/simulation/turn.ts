/**
 * Lets the promise jobs an entry started run to their end before the next
 * entry: the agent's code is async, and its awaits resume as promise jobs.
 * `setImmediate` runs after every pending promise job and waits for nothing
 * else (the simulation does no I/O), so it adds no time and no order of its
 * own: it is not a timer of the run, only the end of a turn. The one place
 * the simulation touches the event loop (test/lint/import-graph.ts).
 */
export function endOfTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
