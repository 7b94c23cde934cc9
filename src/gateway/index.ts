// The stream gateway: agent streams in, events out, commands relayed. Everything public is named here.
export {
  DEFAULT_PUBLISH_WINDOW,
  type GatewayConfig,
  type GatewayConfigInput,
  GatewayConfigSchema,
  isLoopback,
  parseGatewayConfig,
  parseListen,
} from "./config.js";
export { Gateway, type StartOptions } from "./gateway.js";
export { GatewayMetrics, serveMetrics } from "./metrics.js";
export {
  cnKey,
  DEFAULT_REVOKED_BUCKET,
  invalidCnReason,
  normalizeSerial,
  type Revocation,
  RevocationSchema,
  serialKey,
} from "./revocation-keys.js";
export { RevocationBucketMissing, revocationBucket } from "./revocations.js";
