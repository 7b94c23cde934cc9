import type { FleetView } from "../../projections/index.js";

/**
 * Fencing of a pass (docs/ARCHITECTURE.md, "Reconciler"): the pass may be
 * appended only if the reconciler subject's last message is the last pass
 * this leader folded. A leader whose view is stale (another leader appended
 * since) is refused by the log. The runner and `llmgw simulate` both ask
 * here.
 */
export function passExpectation(state: FleetView): number {
  return state.replicas.lastPass?.seq ?? 0;
}
