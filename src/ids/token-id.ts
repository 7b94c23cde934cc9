/**
 * Ids that become one subject token as they are (gateway ids; the replica,
 * shard and command ids agents send are held to the same rule): a
 * wildcard, a dot or a space in one must never make a new subject. They
 * are keys of the projected state too, so no reserved name either.
 */
import { isReservedKey } from "./reserved-keys.js";

/** Letters, digits, `-`, `_`; 1 to 64 characters. */
export const ID_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;

/** Why `id` cannot be a subject token, or undefined when it can. */
export function invalidIdReason(id: string, what = "id"): string | undefined {
  if (id.length === 0) return `${what} is empty`;
  if (id.length > 64) return `${what} is ${id.length} characters long; at most 64 are allowed`;
  if (!ID_PATTERN.test(id)) {
    return `${what} ${JSON.stringify(id)} may contain only letters, digits, '-' and '_'`;
  }
  if (isReservedKey(id)) return `${what} ${JSON.stringify(id)} is a reserved name`;
  return undefined;
}
