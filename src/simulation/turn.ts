/**
 * Turns of the loop: each runs after every promise job the one before it
 * started has run to its end (the agent's code is async, and its awaits
 * resume as promise jobs). A job queued at the end of a turn runs in the
 * current drain of the microtask queue; the tick it queues
 * (`process.nextTick`) runs only once that drain is over — every job queued
 * meanwhile, however deep its chain, included — and the tick starts the
 * next turn. It adds no time and no order of its own: it is not a timer of
 * the run, only the end of a turn. Unlike a `setImmediate` (or an awaited
 * promise) per turn it neither goes round the event loop (a poll of the OS
 * per step) nor allocates; the simulation does no I/O, so there is nothing
 * for the loop to find. The one place the simulation touches the event
 * loop's queues (test/lint/import-graph.ts).
 */

/**
 * Runs `turn` now, then again at the end of each turn while it returns
 * true; resolves once it returned false, or rejects with what it threw.
 */
export function eachTurn(turn: () => boolean): Promise<void> {
  return new Promise((resolve, reject) => {
    const next = () => {
      let more: boolean;
      try {
        more = turn();
      } catch (err) {
        reject(err);
        return;
      }
      if (more) queueMicrotask(endOfTurn);
      else resolve();
    };
    const endOfTurn = () => process.nextTick(next);
    next();
  });
}
