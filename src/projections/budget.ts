/**
 * A model's disruption budget as the catalog states it: `minAvailable` is
 * a count ("2") or a percentage of the desired replicas ("75%", rounded
 * up). One reading for the catalog's validation, the reconciler and the API.
 */

const COUNT = /^(0|[1-9][0-9]{0,4})$/;
const PERCENT = /^(0|[1-9][0-9]{0,2})%$/;

/** Why `text` is not a minAvailable, or undefined when it is one. */
export function invalidMinAvailableReason(text: string): string | undefined {
  const pct = PERCENT.exec(text);
  if (pct) return Number(pct[1]) <= 100 ? undefined : "a percentage must be at most 100%";
  if (COUNT.test(text)) return undefined;
  return 'must be a whole number of replicas (e.g. "2") or a percentage of the desired replicas (e.g. "75%")';
}

/**
 * The number of ready replicas the budget keeps for `desired` wanted:
 * a count as written, a percentage of desired rounded up; 0 for no budget
 * (absent or unreadable).
 */
export function resolveMinAvailable(text: string | undefined, desired: number): number {
  if (text === undefined || invalidMinAvailableReason(text) !== undefined) return 0;
  const pct = PERCENT.exec(text);
  if (pct) return Math.ceil((Number(pct[1]) * desired) / 100);
  return Number(text);
}
