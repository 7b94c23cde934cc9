/**
 * The wait before the next connection attempt: exponential in the attempts
 * that failed since the last registration, capped, with jitter so that a
 * fleet that lost its gateway at the same moment does not come back at the
 * same moment. `random` is a number in [0, 1).
 */
export function reconnectDelayMs(failures: number, minMs: number, maxMs: number, random: number): number {
  const ceiling = Math.min(maxMs, minMs * 2 ** Math.min(failures, 20));
  return Math.round(ceiling * (0.5 + random * 0.5));
}
