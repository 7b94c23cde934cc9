/**
 * Node ids are DNS names (RFC 1123 subdomains), the way real fleets name
 * machines: `gpu-017.rack4.dc1.example.com`. A dot separates the labels of
 * a name but also the levels of a NATS subject, so a node id is never put in
 * a subject as it is: it goes in as one token with every `.` written as `_`.
 * A DNS name never contains `_`, so the token maps back to exactly one id.
 */
import { isReservedKey } from "./reserved-keys.js";

/** The longest DNS name. */
export const NODE_ID_MAX_LENGTH = 253;
/** The longest label (the part between two dots). */
export const NODE_ID_MAX_LABEL = 63;

/** One label: lower-case letters, digits and `-`, starting and ending with a letter or digit. */
const LABEL = /^[a-z0-9]([a-z0-9-]*[a-z0-9])?$/;

/** The rule, as every refusal states it. */
export const NODE_ID_RULE =
  "must be a DNS name (RFC 1123): lower-case letters, digits, '-' and '.', labels of 1 to 63 characters that start and end with a letter or digit, at most 253 in all";

/** Why `id` cannot be a node id, or undefined when it can. */
export function invalidNodeIdReason(id: string, what = "node id"): string | undefined {
  if (id.length === 0) return `${what} is empty; it ${NODE_ID_RULE}`;
  // A long id is not echoed back whole: the length is what is wrong with it.
  if (id.length > NODE_ID_MAX_LENGTH) {
    return `${what} is ${id.length} characters long; it ${NODE_ID_RULE}`;
  }
  const labels = id.split(".");
  const bad = labels.some((l) => l.length > NODE_ID_MAX_LABEL || !LABEL.test(l));
  if (bad) return `${what} ${JSON.stringify(id)} ${NODE_ID_RULE}`;
  // `constructor` is a DNS name but also a key of every plain object, where the projections keep nodes.
  if (isReservedKey(id)) return `${what} ${JSON.stringify(id)} is a reserved name`;
  return undefined;
}

/** The subject token for a node id: validated, each `.` written as `_`. */
export function nodeIdToken(id: string): string {
  const why = invalidNodeIdReason(id);
  if (why) throw new RangeError(`cannot build a subject: ${why}`);
  return id.replaceAll(".", "_");
}

/** The node id a subject token stands for: the inverse of {@link nodeIdToken}. */
export function nodeIdFromToken(token: string): string {
  // A token with a dot is two subject levels, never one node id.
  const id = token.replaceAll("_", ".");
  const why = token.includes(".") ? "it holds a '.'" : invalidNodeIdReason(id);
  if (why) throw new RangeError(`subject token ${JSON.stringify(token)} is not a node id: ${why}`);
  return id;
}
