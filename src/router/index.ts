/** `llmgw router`: the OpenAI-compatible data plane that follows the routing table (docs/router.md). */
export { type ApiKey, ApiKeys, ApiKeysFileError, readApiKeysFile, watchApiKeysFile } from "./api-keys.js";
export { type ModelScan, scanModel } from "./body-model.js";
export { CONFIG_FLAGS, type RouterConfig, type RouterConfigInput, routerConfigSchema } from "./config.js";
export { LoadFeed, replicaOfRankZeroShard } from "./load-feed.js";
export { RouterMetrics } from "./metrics.js";
export {
  affinityKey,
  type Candidate,
  DEFAULT_WEIGHTS,
  fnv1a,
  loadScore,
  type PickInput,
  type PickWeights,
  pickReplica,
} from "./picker.js";
export { ReplicaBook, type ReplicaLoad } from "./replicas.js";
export {
  type RouterServer,
  type RouterServerOptions,
  startRouterServer,
  type TableStatus,
} from "./server.js";
export { endpointListSchema, RoutingTable, type TableChange, type TableEndpoint } from "./table.js";
export { TableFollower, type TableFollowerOptions } from "./table-follower.js";
