/**
 * The rule for shard and replica ids, as the agent applies it before an id
 * names a file under its state directory (a record, a log): the log's id
 * rule (1 to 64 of letters, digits, '-' and '_'), repeated here because the
 * agent is a client of the agent protocol only and does not import the log.
 */
const ID = /^[A-Za-z0-9_-]{1,64}$/;

/** Why `id` may not name a file, or undefined when it may. */
export function idProblem(what: string, id: string): string | undefined {
  return ID.test(id)
    ? undefined
    : `${what} ${JSON.stringify(id.slice(0, 80))} is not 1 to 64 of letters, digits, '_' and '-'`;
}
