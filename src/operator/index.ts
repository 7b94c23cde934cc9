// The operator API: server, catalog file, views. Everything public is named here.
export { ADMIN_TOKEN_NAME, type AuthMode, adminTokenEntry, DEV_OPERATOR, isLoopbackHost } from "./auth.js";
export * from "./catalog/index.js";
export { NAME_PATTERN } from "./catalog/index.js";
export {
  ApiCallError,
  ApiClient,
  type ApiClientOptions,
  type ApiPaths,
  type ApiResponse,
  type ApiSchemas,
  type StreamPosition,
  type TypedApi,
} from "./client.js";
export type { ApiErrorCode, ErrorBody } from "./errors.js";
export type { ExplainedTouch, HistoryEntry } from "./explain.js";
export { FleetHistory, type FleetHistoryOptions } from "./history.js";
export { ROLES, type Role } from "./roles.js";
export type { RolloutView } from "./rollouts-view.js";
export type { EventRecordJson } from "./routes/events.js";
export {
  type ApiOptions,
  type ApiServer,
  type ApiTls,
  checkAuth,
  parseApiLimits,
  startApi,
} from "./server.js";
export { TOKEN_RULE, weakTokenReason } from "./token-strength.js";
export {
  type ApiToken,
  newToken,
  type Principal,
  parseTokensText,
  TokenTable,
  tokenEntrySchema,
  tokenSha256,
  tokensFileSchema,
} from "./tokens.js";
export { readTokensFile, TokensFileError, watchTokensFile } from "./tokens-file.js";
export type { GpuView, ModelReadiness, NodeView, ReplicaView } from "./views.js";
export { logWhatIfReader } from "./what-if.js";
