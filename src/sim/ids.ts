/**
 * Node ids of a simulated fleet. `llmgw certs` and `llmgw sim` both derive
 * them from `--nodes N --node-prefix P`, so the certificates written for a
 * fleet are the ones its agents look for.
 */

/**
 * Letters, digits, `-`, `_`; 1 to 64 characters. The same rule the log applies
 * to subject tokens (the gateway rejects anything else), repeated here because
 * the simulator is a client of the agent protocol only and does not import the
 * log.
 */
export const NODE_ID_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;

/** Why `id` cannot be a node id, or undefined when it can. */
export function invalidNodeIdReason(id: string): string | undefined {
  if (NODE_ID_PATTERN.test(id)) return undefined;
  return `node id ${JSON.stringify(id)} must match [A-Za-z0-9_-]{1,64}`;
}

/** `prefix1` … `prefixN`: numbered from 1, like machines in a rack listing. */
export function nodeIds(count: number, prefix: string): string[] {
  return Array.from({ length: count }, (_, i) => `${prefix}${i + 1}`);
}
