/**
 * How long before a lease could expire its holder stops acting, when no
 * margin is configured: the runner's lease (lease.ts) and the simulation's
 * leader (src/simulation/reconciler.ts) both take it from here. Pure.
 */
export function defaultLeaseSafetyMarginMs(ttlMs: number): number {
  return Math.max(Math.floor(ttlMs / 5), 1);
}
