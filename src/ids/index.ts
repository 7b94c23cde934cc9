// Id rules: what a node id, a host address and a key of the projected state may be.
// Pure: the pure rooms import them without reaching NATS. Everything public is named here.

export { HOST_ADDRESS_RULE, invalidHostAddressReason, isIpLiteral } from "./host-address.js";
export {
  invalidNodeIdReason,
  NODE_ID_MAX_LABEL,
  NODE_ID_MAX_LENGTH,
  NODE_ID_RULE,
  nodeIdFromToken,
  nodeIdToken,
} from "./node-id.js";
export { isReservedKey } from "./reserved-keys.js";
export { ID_PATTERN, invalidIdReason } from "./token-id.js";
