/** The rule for node ids, as agents apply it before they register. */

/** One DNS label: lower-case letters, digits and `-`, starting and ending with a letter or digit. */
const LABEL = /^[a-z0-9]([a-z0-9-]*[a-z0-9])?$/;

/**
 * Node ids are DNS names (RFC 1123): the rule the gateway applies at
 * registration (it refuses anything else), repeated here because agents
 * (the node agent and the simulator) are clients of the agent protocol only
 * and do not import the log.
 */
export const NODE_ID_RULE =
  "must be a DNS name (RFC 1123): lower-case letters, digits, '-' and '.', labels of 1 to 63 characters that start and end with a letter or digit, at most 253 in all";

/** Why `id` cannot be a node id, or undefined when it can. */
export function invalidNodeIdReason(id: string): string | undefined {
  if (id.length > 253) return `node id is ${id.length} characters long; it ${NODE_ID_RULE}`;
  const ok = id.split(".").every((l) => l.length <= 63 && LABEL.test(l));
  return ok ? undefined : `node id ${JSON.stringify(id)} ${NODE_ID_RULE}`;
}
