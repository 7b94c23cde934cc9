/**
 * Lets the promise jobs an entry started run to their end before the next
 * entry: the agent's code is async, and its awaits resume as promise jobs.
 * A job queued now runs in the current drain of the microtask queue; the
 * tick it queues (`process.nextTick`) runs only once that drain is over —
 * every job queued meanwhile, however deep its chain, included — so the
 * promise resolves after all of them. It adds no time and no order of its
 * own: it is not a timer of the run, only the end of a turn. Unlike a
 * `setImmediate` it does not go round the event loop (a poll of the OS per
 * step, a fifth of a run's CPU); the simulation does no I/O, so there is
 * nothing for the loop to find. The one place the simulation touches the
 * event loop's queues (test/lint/import-graph.ts).
 */
export function endOfTurn(): Promise<void> {
  return new Promise((resolve) => queueMicrotask(() => process.nextTick(resolve)));
}
