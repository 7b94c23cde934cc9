/**
 * The API's answers as the UI reads them: the operator API's own schemas
 * (src/operator/api-schemas.ts, the source of `/openapi.json`), imported as
 * types only, so nothing of the server reaches the bundle and the UI's type
 * check fails the moment an answer's shape changes under it.
 */
import type { z } from "zod";
import type {
  EventsPageSchema,
  ExplainSchema,
  FleetSchema,
  HistorySchema,
  RouterRequestsSchema,
  WhatIfResultSchema,
} from "../api-schemas.ts";

export type Fleet = z.output<typeof FleetSchema>;
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
export type EventRow = z.output<typeof EventsPageSchema>["events"][number];
export type Explain = z.output<typeof ExplainSchema>;
export type Candidate = NonNullable<Explain["placement"]>["runnersUp"][number];
export type HistoryEntry = z.output<typeof HistorySchema>["history"][number];
export type WhatIfResult = z.output<typeof WhatIfResultSchema>;
export type Difference = WhatIfResult["passes"][number]["differences"][number];
export type RouterRequests = z.output<typeof RouterRequestsSchema>;
