/**
 * The rule for shard and replica ids, as the agent applies it before an id
 * names a file under its state directory (a record, a log). The control
 * plane derives them from catalog names (letters, digits, '.', '_' and '-',
 * starting with a letter or digit) and counters: the same characters, so
 * never a '/', never '.' or '..', never a hidden file; at most 200, so
 * that a name with its suffix stays within a file name's 255 bytes.
 * Repeated here because the agent is a client of the agent protocol only
 * and does not import the control plane.
 */
const ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$/;

/** Why `id` may not name a file, or undefined when it may. */
export function idProblem(what: string, id: string): string | undefined {
  return ID.test(id)
    ? undefined
    : `${what} ${JSON.stringify(id.slice(0, 80))} is not 1 to 200 of letters, digits, '.', '_' and '-' starting with a letter or digit`;
}
