// The operator API: server, catalog file, views. Everything public is named here.
export { type AuthMode, isLoopbackHost } from "./auth.js";
export * from "./catalog/index.js";
export { ApiCallError, ApiClient, type ApiClientOptions, type ApiResponse } from "./client.js";
export type { ApiErrorCode, ErrorBody } from "./errors.js";
export type { ExplainedTouch, HistoryEntry } from "./explain.js";
export { FleetHistory, type FleetHistoryOptions } from "./history.js";
export { type ApiOptions, type ApiServer, checkAuth, parseApiLimits, startApi } from "./server.js";
export type { GpuView, ModelReadiness, NodeView, ReplicaView } from "./views.js";
export { logWhatIfReader } from "./what-if.js";
