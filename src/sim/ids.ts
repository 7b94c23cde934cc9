/**
 * Node ids of a simulated fleet. `llmgw certs` and `llmgw sim` both derive
 * them from `--nodes N --node-prefix P`, so the certificates written for a
 * fleet are the ones its agents look for.
 */

export { invalidNodeIdReason, NODE_ID_RULE } from "../agent/client/index.js";

/** Every node of a fleet: the numbered ones, then the ones named one by one. */
export function fleetNodeIds(c: { nodes: number; nodePrefix: string; nodeIds: readonly string[] }): string[] {
  return [...nodeIds(c.nodes, c.nodePrefix), ...c.nodeIds];
}

/** `prefix1` … `prefixN`: numbered from 1, like machines in a rack listing. */
export function nodeIds(count: number, prefix: string): string[] {
  return Array.from({ length: count }, (_, i) => `${prefix}${i + 1}`);
}
