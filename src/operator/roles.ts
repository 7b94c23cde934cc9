/**
 * The roles of operator API tokens, lowest first: each role may do all that
 * the ones before it may. viewer reads; operator also writes node and GPU
 * intent (cordon, uncordon, drain, clear); admin also applies the catalog.
 */
export const ROLES = ["viewer", "operator", "admin"] as const;
export type Role = (typeof ROLES)[number];

/** True when a token with role `have` may call a route that needs `need`. */
export function roleAllows(have: Role, need: Role): boolean {
  return ROLES.indexOf(have) >= ROLES.indexOf(need);
}
