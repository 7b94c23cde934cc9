// NATS authentication: credentials files, each role's permissions, and the server's auth config.
// Everything public is named here.

export {
  authenticatorFromCredentials,
  formatNkeySeedFile,
  holdsUserJwt,
  NatsCredentialsError,
  type NatsSecurity,
  NKEY_SEED_EXTENSION,
} from "./credentials.js";
export {
  DEFAULT_BUCKETS,
  DEFAULT_LAYOUT,
  NATS_ROLES,
  type NatsLayout,
  type NatsRole,
  type RolePermissions,
  rolePermissions,
} from "./permissions.js";
export { type RoleUser, renderServerAuth } from "./server-auth.js";
