// The reconciler's leader runner: the I/O shell around decide. Everything public is named here.
export { Backoff } from "./backoff.js";
export { ConfigFileError, loadConfigFile, parseConfig } from "./config-file.js";
export type { DecideFn, DecideInputOf, DecideResult, FollowedProjection, GatewaySet } from "./contract.js";
export {
  DEFAULT_ENDPOINTS_BUCKET,
  EndpointsBucket,
  endpointsKey,
  modelOfEndpointsKey,
} from "./endpoints-bucket.js";
export { Lease, type LeaseOptions, type LeaseValue, type LeaseWrite, monotonicMs } from "./lease.js";
export { LiveGateways, type LiveGatewaysOptions } from "./live-gateways.js";
export { RunnerMetrics } from "./metrics.js";
export { decideInput, type PassFacts, passBody } from "./pass-body.js";
export {
  type PassOutcome,
  ReconcilerRunner,
  type RunnerOptions,
  type RunnerRole,
  type StepDown,
} from "./runner.js";
export { DEFAULT_TRIGGER_OPTIONS, PassTriggers, type Trigger, type TriggerOptions } from "./triggers.js";
