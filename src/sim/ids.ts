/**
 * Node ids of a simulated fleet. `llmgw certs` and `llmgw sim` both derive
 * them from `--nodes N --node-prefix P`, so the certificates written for a
 * fleet are the ones its agents look for.
 */

/** One DNS label: lower-case letters, digits and `-`, starting and ending with a letter or digit. */
const LABEL = /^[a-z0-9]([a-z0-9-]*[a-z0-9])?$/;

/**
 * Node ids are DNS names (RFC 1123): the rule the gateway applies at
 * registration (it refuses anything else), repeated here because the
 * simulator is a client of the agent protocol only and does not import the
 * log.
 */
export const NODE_ID_RULE =
  "must be a DNS name (RFC 1123): lower-case letters, digits, '-' and '.', labels of 1 to 63 characters that start and end with a letter or digit, at most 253 in all";

/** Why `id` cannot be a node id, or undefined when it can. */
export function invalidNodeIdReason(id: string): string | undefined {
  if (id.length > 253) return `node id is ${id.length} characters long; it ${NODE_ID_RULE}`;
  const ok = id.split(".").every((l) => l.length <= 63 && LABEL.test(l));
  return ok ? undefined : `node id ${JSON.stringify(id)} ${NODE_ID_RULE}`;
}

/** Every node of a fleet: the numbered ones, then the ones named one by one. */
export function fleetNodeIds(c: { nodes: number; nodePrefix: string; nodeIds: readonly string[] }): string[] {
  return [...nodeIds(c.nodes, c.nodePrefix), ...c.nodeIds];
}

/** `prefix1` … `prefixN`: numbered from 1, like machines in a rack listing. */
export function nodeIds(count: number, prefix: string): string[] {
  return Array.from({ length: count }, (_, i) => `${prefix}${i + 1}`);
}
