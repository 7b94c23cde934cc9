// The stream gateway: agent streams in, events out, commands relayed. Everything public is named here.
export {
  type GatewayConfig,
  type GatewayConfigInput,
  GatewayConfigSchema,
  isLoopback,
  parseGatewayConfig,
  parseListen,
} from "./config.js";
export { Gateway, type StartOptions } from "./gateway.js";
export { GatewayMetrics, serveMetrics } from "./metrics.js";
