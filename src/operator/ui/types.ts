/**
 * The API's answers as the UI reads them: the schemas of the API's OpenAPI
 * document, as generated into src/gen/api (`npm run gen:api`), imported as
 * types only, so nothing of the server reaches the bundle and the UI's type
 * check fails the moment an answer's shape changes under it.
 */
import type { components } from "../../gen/api/schema.ts";

type Schemas = components["schemas"];

export type Fleet = Schemas["Fleet"];
export type Node = Fleet["nodes"][number];
export type Liveness = Node["liveness"];
export type Gpu = Node["gpus"][number];
export type ShardOnGpu = Gpu["shards"][number];
export type Fabric = Node["fabrics"][number];
export type Replica = Fleet["replicas"][number];
export type ReplicaShard = Replica["shards"][number];
export type Phase = Replica["phase"];
export type ModelReadiness = Fleet["readiness"][number];
export type Rollout = Fleet["rollouts"][number];
export type EventRow = Schemas["EventsPage"]["events"][number];
export type Explain = Schemas["ReplicaExplanation"];
export type Candidate = NonNullable<Explain["placement"]>["runnersUp"][number];
export type HistoryEntry = Schemas["ReplicaHistory"]["history"][number];
export type WhatIfResult = Schemas["WhatIfResult"];
export type Difference = WhatIfResult["passes"][number]["differences"][number];
export type RouterRequests = Schemas["RouterRequests"];
