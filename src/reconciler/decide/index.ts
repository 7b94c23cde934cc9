// The reconciler's pure core: one pass from the projected fleet to decisions and commands.
export {
  DEFAULT_RECONCILER_CONFIG,
  describeConfigError,
  fitPassBytes,
  PASS_HEADROOM_BYTES,
  type PassBytesFit,
  type ReconcilerConfig,
  reconcilerConfigSchema,
} from "./config.js";
export { decide } from "./decide.js";
export { passExpectation } from "./expectation.js";
export { verifyKeptRoutes } from "./kept-routes.js";
export type { DecideInput, DecideOutput } from "./types.js";
