/**
 * Every route of the operator API with the schemas of what it takes and
 * answers: the table the OpenAPI document is built from (openapi.ts). A new
 * route is one entry here; test/operator/openapi.test.ts fails for a route
 * the server has and this table lacks, and for an answer that does not match.
 */
import type { z } from "zod";
import {
  CatalogAppliedSchema,
  CatalogHistorySchema,
  EndpointsSchema,
  EventsPageSchema,
  ExplainSchema,
  FleetSchema,
  HealthSchema,
  HistorySchema,
  ModelScaledSchema,
  NodeDecisionsSchema,
  NodeSchema,
  NodesSchema,
  ReadySchema,
  ReplaySchema,
  ReplicaDecisionsSchema,
  ReplicaSchema,
  ReplicasSchema,
  RolloutSchema,
  RolloutsSchema,
  RolloutUndoneSchema,
  RouterRequestsSchema,
  WhatIfResultSchema,
} from "./api-schemas.js";
import type { Role } from "./roles.js";
import { catalogAtQuery } from "./routes/catalog.js";
import { query as endpointsQuery } from "./routes/endpoints.js";
import { engineLogsQuery } from "./routes/engine-logs.js";
import { eventsQuery } from "./routes/events.js";
import { fleetQuery } from "./routes/fleet.js";
import { explainLogQuery, replayQuery } from "./routes/log-reads.js";
import { modelPatchBody } from "./routes/models.js";
import { intentBody } from "./routes/nodes.js";
import { atQuery, listQuery } from "./routes/replicas.js";
import { whatIfBody } from "./routes/what-if.js";

/** Who may call a route: anyone (`open`: probes, the document itself), or a token with at least this role. */
export type RouteAccess = "open" | Role;

/** What a route answers with on success. */
export type RouteAnswer =
  /** `stream`: with the query's follow=true, the same body as server-sent events instead. */
  | { kind: "json"; schema: z.ZodType; description: string; stream?: string }
  /** The catalog file as operators write it (its own component, CatalogResponse). */
  | { kind: "catalog"; description: string }
  /** Not JSON: Prometheus text, server-sent events, a web page. */
  | { kind: "text"; contentType: string; description: string };

/** The document's tags, in the order the reference lists them. */
export const API_TAGS = {
  nodes: "Nodes and GPUs: list, inspect, cordon, drain.",
  replicas: "Replicas: list, inspect, their story.",
  log: "The log read: events, the fleet at any point, decisions, what-if.",
  endpoints: "The routing table.",
  catalog: "The model catalog and scaling.",
  rollouts: "Rollouts of a spec change.",
  health: "Probes and metrics.",
  documents: "This document and its reference page.",
} as const;
export type ApiTag = keyof typeof API_TAGS;

export interface ApiRoute {
  method: "GET" | "POST" | "PUT" | "PATCH";
  /** The operation's id in the document and the generated client, named by hand (`listNodes`, `cordonNode`). */
  operationId: string;
  tag: ApiTag;
  /** As fastify writes it: `/v1/nodes/:id`. */
  url: string;
  summary: string;
  /** The role it needs; auth.ts checks it for every request. */
  access: RouteAccess;
  /** What `:id` is, when the path has one (`:model` for a model). */
  id?: "node" | "replica" | "replica-or-shard" | "model";
  /** The path has `:index`, a GPU index of the node. */
  gpuIndex?: true;
  query?: z.ZodObject;
  body?: z.ZodType;
  /** The catalog body: JSON or YAML, checked by the catalog's own validation. */
  catalogBody?: true;
  /** Headers the route reads or sets (documented with the route). */
  ifMatch?: true;
  answer: RouteAnswer;
  /** Error statuses besides 401, 403 and 500 (added from `access`). */
  errors: number[];
}

const NODE_ACTIONS = [
  ["cordon", "Cordon a node: no new shards are placed on it."],
  ["uncordon", "Uncordon a node."],
  ["drain", "Drain a node: its replicas are replaced elsewhere first, then stopped."],
] as const;

const GPU_ACTIONS = [
  ["clear", "Clear a GPU's problems and faults: it takes work again (unless cordoned)."],
  ["cordon", "Cordon one GPU: no new work on it; what runs there stays."],
  ["uncordon", "Uncordon one GPU."],
] as const;

export const API_ROUTES: ApiRoute[] = [
  {
    method: "GET",
    url: "/healthz",
    operationId: "getHealth",
    tag: "health",
    summary: "Liveness.",
    access: "open",
    answer: { kind: "json", schema: HealthSchema, description: "the process is up" },
    errors: [],
  },
  {
    method: "GET",
    url: "/readyz",
    operationId: "getReadiness",
    tag: "health",
    summary: "Readiness: connected to NATS and the projection caught up with the log.",
    access: "open",
    answer: { kind: "json", schema: ReadySchema, description: "ready, at this sequence" },
    errors: [503],
  },
  {
    method: "GET",
    url: "/metrics",
    operationId: "getMetrics",
    tag: "health",
    access: "viewer",
    summary: "Prometheus metrics of this API process.",
    answer: { kind: "text", contentType: "text/plain", description: "Prometheus text exposition" },
    errors: [],
  },
  {
    method: "GET",
    url: "/openapi.json",
    operationId: "getOpenApiDocument",
    tag: "documents",
    summary: "This document.",
    access: "open",
    answer: { kind: "text", contentType: "application/json", description: "the OpenAPI 3.1 document" },
    errors: [],
  },
  {
    method: "GET",
    url: "/docs",
    operationId: "getApiReference",
    tag: "documents",
    summary: "A reference page of the API, built from this document.",
    access: "open",
    answer: { kind: "text", contentType: "text/html", description: "the reference page" },
    errors: [],
  },
  {
    method: "GET",
    url: "/v1/nodes",
    operationId: "listNodes",
    tag: "nodes",
    access: "viewer",
    summary: "Every node, sorted by id.",
    answer: { kind: "json", schema: NodesSchema, description: "the nodes" },
    errors: [],
  },
  {
    method: "GET",
    url: "/v1/nodes/:id",
    operationId: "getNode",
    tag: "nodes",
    access: "viewer",
    summary: "One node.",
    id: "node",
    answer: { kind: "json", schema: NodeSchema, description: "the node" },
    errors: [400, 404],
  },
  ...NODE_ACTIONS.map(
    ([action, summary]): ApiRoute => ({
      method: "POST",
      url: `/v1/nodes/:id/${action}`,
      operationId: `${action}Node`,
      tag: "nodes",
      access: "operator",
      summary,
      id: "node",
      body: intentBody,
      answer: {
        kind: "json",
        schema: NodeSchema,
        description: "the sequence appended and the node after it",
      },
      errors: [400, 404, 503, 504],
    }),
  ),
  ...GPU_ACTIONS.map(
    ([action, summary]): ApiRoute => ({
      method: "POST",
      url: `/v1/nodes/:id/gpus/:index/${action}`,
      operationId: `${action}Gpu`,
      tag: "nodes",
      access: "operator",
      summary,
      id: "node",
      gpuIndex: true,
      body: intentBody,
      answer: {
        kind: "json",
        schema: NodeSchema,
        description: "the sequence appended and the node after it",
      },
      errors: [400, 404, 503, 504],
    }),
  ),
  {
    method: "POST",
    url: "/v1/nodes/:id/problems/clear",
    operationId: "clearNodeProblems",
    tag: "nodes",
    access: "operator",
    summary: "Clear a node's node-level problems (those tied to no GPU).",
    id: "node",
    body: intentBody,
    answer: { kind: "json", schema: NodeSchema, description: "the sequence appended and the node after it" },
    errors: [400, 404, 503, 504],
  },
  {
    method: "GET",
    url: "/v1/replicas",
    operationId: "listReplicas",
    tag: "replicas",
    access: "viewer",
    summary: "Replicas (by model, then id) and each model's ready/desired count.",
    query: listQuery,
    answer: { kind: "json", schema: ReplicasSchema, description: "the replicas" },
    errors: [400],
  },
  {
    method: "GET",
    url: "/v1/replicas/:id",
    operationId: "getReplica",
    tag: "replicas",
    access: "viewer",
    summary: "One replica.",
    id: "replica",
    answer: { kind: "json", schema: ReplicaSchema, description: "the replica" },
    errors: [400, 404],
  },
  {
    method: "GET",
    url: "/v1/logs/:id",
    operationId: "streamEngineLogs",
    tag: "replicas",
    access: "operator",
    summary:
      "An engine's output (`llmgw logs`): the last `tail` lines of a replica's first shard (or of a shard), then with follow=true what it prints next. Asked of the node's agent through its gateway; never recorded in the log.",
    id: "replica-or-shard",
    query: engineLogsQuery,
    answer: {
      kind: "text",
      contentType: "text/event-stream",
      description:
        "server-sent events: `output` (data: the text as a JSON string, terminal escapes removed) as it comes, then one `end` (data: {end, error}; end is done, not-found, limit, cancelled, failed, busy, not-connected, disconnected or expired)",
    },
    errors: [400, 404, 410, 503],
  },
  {
    method: "GET",
    url: "/v1/replicas/:id/explain",
    operationId: "explainReplicaPlacement",
    tag: "replicas",
    access: "viewer",
    summary: "The decisions that touched a replica, and where it is and why (or why it waits).",
    id: "replica",
    query: atQuery,
    answer: { kind: "json", schema: ExplainSchema, description: "the explanation" },
    errors: [400, 404],
  },
  {
    method: "GET",
    url: "/v1/replicas/:id/history",
    operationId: "getReplicaHistory",
    tag: "replicas",
    access: "viewer",
    summary: "A replica's history: created, placed, each shard's state, drained, removed.",
    id: "replica",
    query: atQuery,
    answer: { kind: "json", schema: HistorySchema, description: "the history, oldest first" },
    errors: [400, 404],
  },
  {
    method: "GET",
    url: "/v1/events",
    operationId: "listEvents",
    tag: "log",
    access: "viewer",
    summary: "The log decoded, a page at a time, filterable by subject, node, replica and kind.",
    query: eventsQuery,
    answer: { kind: "json", schema: EventsPageSchema, description: "a page of events" },
    errors: [400, 503],
  },
  {
    method: "GET",
    url: "/v1/replay",
    operationId: "replayFleet",
    tag: "log",
    access: "viewer",
    summary:
      "The folded fleet state at a sequence (`at`) or a time (`time`), optionally only one node or replica: what `llmgw replay` prints.",
    query: replayQuery,
    answer: { kind: "json", schema: ReplaySchema, description: "the fleet state there" },
    errors: [400, 404, 503],
  },
  {
    method: "GET",
    url: "/v1/explain/replica/:id",
    operationId: "explainReplica",
    tag: "log",
    access: "viewer",
    summary:
      "The recorded decisions and commands that touched a replica, up to `at` or `time`: what `llmgw explain replica` prints.",
    id: "replica",
    query: explainLogQuery,
    answer: { kind: "json", schema: ReplicaDecisionsSchema, description: "the decisions, oldest first" },
    errors: [400, 503],
  },
  {
    method: "GET",
    url: "/v1/explain/node/:id",
    operationId: "explainNode",
    tag: "log",
    access: "viewer",
    summary:
      "The recorded decisions and commands that touched a node, up to `at` or `time`: what `llmgw explain node` prints.",
    id: "node",
    query: explainLogQuery,
    answer: { kind: "json", schema: NodeDecisionsSchema, description: "the decisions, oldest first" },
    errors: [400, 503],
  },
  {
    method: "GET",
    url: "/v1/fleet",
    operationId: "getFleet",
    tag: "log",
    access: "viewer",
    summary: "The fleet now, at a sequence (`at`) or at a time (`time`).",
    query: fleetQuery,
    answer: { kind: "json", schema: FleetSchema, description: "the fleet" },
    errors: [400],
  },
  {
    method: "GET",
    url: "/v1/stream",
    operationId: "streamPosition",
    tag: "log",
    access: "viewer",
    summary: "Server-sent events with the API's live position in the log (`event: position`).",
    answer: {
      kind: "text",
      contentType: "text/event-stream",
      description: "`event: position` with `data: {seq, timeMs}`, at once and as the log grows",
    },
    errors: [],
  },
  {
    method: "GET",
    url: "/v1/endpoints",
    operationId: "listEndpoints",
    tag: "endpoints",
    access: "viewer",
    summary: "The routing table as the log records it: ready replicas per model and where rank 0 serves.",
    query: endpointsQuery,
    answer: {
      kind: "json",
      schema: EndpointsSchema,
      description: "the table, or one model's list",
      stream: "with follow=true: `event: endpoints` with the same body, at once and after every change",
    },
    errors: [400, 404],
  },
  {
    method: "GET",
    url: "/v1/router/requests",
    operationId: "routerRequests",
    tag: "endpoints",
    access: "viewer",
    summary:
      "Requests per replica (in total, in flight, failed) as the routers given with `llmgw api --router-url` count them, read from their /metrics at the call.",
    answer: {
      kind: "json",
      schema: RouterRequestsSchema,
      description: "the routers read and their counts summed by replica (no routers: both lists empty)",
    },
    errors: [],
  },
  {
    method: "POST",
    url: "/v1/what-if",
    operationId: "runWhatIf",
    tag: "log",
    // Costly: it re-runs decide at every recorded pass of the range, so not every reader may start it.
    access: "operator",
    summary:
      "Re-run placement over recorded passes with another reconciler config; nothing is written. Needs the operator role: it re-runs decide at every pass of the range.",
    body: whatIfBody,
    answer: { kind: "json", schema: WhatIfResultSchema, description: "the passes whose decisions differ" },
    errors: [400],
  },
  {
    method: "GET",
    url: "/v1/catalog",
    operationId: "getCatalog",
    tag: "catalog",
    access: "viewer",
    summary:
      "The catalog in force (or, with `at`, the one in force at that sequence); its ETag is the catalog's sequence.",
    query: catalogAtQuery,
    answer: { kind: "catalog", description: "the catalog in force" },
    errors: [400, 404, 503],
  },
  {
    method: "GET",
    url: "/v1/catalog/history",
    operationId: "getCatalogHistory",
    tag: "catalog",
    access: "viewer",
    summary: "Every catalog applied, oldest first, with each model's spec revision.",
    answer: { kind: "json", schema: CatalogHistorySchema, description: "the history" },
    errors: [503],
  },
  {
    method: "GET",
    url: "/v1/rollouts",
    operationId: "listRollouts",
    tag: "rollouts",
    access: "viewer",
    summary: "Every model's rollout: revision, policy, state, replicas on the current and older revisions.",
    answer: { kind: "json", schema: RolloutsSchema, description: "the rollouts, by model" },
    errors: [],
  },
  {
    method: "GET",
    url: "/v1/rollouts/:model",
    operationId: "getRollout",
    tag: "rollouts",
    access: "viewer",
    summary: "One model's rollout.",
    id: "model",
    answer: { kind: "json", schema: RolloutSchema, description: "the rollout" },
    errors: [400, 404],
  },
  {
    method: "POST",
    url: "/v1/rollouts/:model/pause",
    operationId: "pauseRollout",
    tag: "rollouts",
    access: "admin",
    summary: "Pause a model's rollout: no replica is replaced until it resumes.",
    id: "model",
    body: intentBody,
    answer: {
      kind: "json",
      schema: RolloutSchema,
      description: "the sequence appended and the rollout after it",
    },
    errors: [400, 404, 503, 504],
  },
  {
    method: "POST",
    url: "/v1/rollouts/:model/resume",
    operationId: "resumeRollout",
    tag: "rollouts",
    access: "admin",
    summary: "Resume a paused rollout.",
    id: "model",
    body: intentBody,
    answer: {
      kind: "json",
      schema: RolloutSchema,
      description: "the sequence appended and the rollout after it",
    },
    errors: [400, 404, 503, 504],
  },
  {
    method: "POST",
    url: "/v1/rollouts/:model/undo",
    operationId: "undoRollout",
    tag: "rollouts",
    access: "admin",
    summary: "Re-apply the model's previous spec from the catalog history (the rest of the catalog stays).",
    id: "model",
    body: intentBody,
    answer: {
      kind: "json",
      schema: RolloutUndoneSchema,
      description: "the catalog applied and the rollout after it",
    },
    errors: [400, 404, 409, 412, 503, 504],
  },
  {
    method: "PUT",
    url: "/v1/catalog",
    operationId: "applyCatalog",
    tag: "catalog",
    access: "admin",
    summary: "Apply a catalog (JSON or YAML); `If-Match` names the sequence the change was based on.",
    catalogBody: true,
    ifMatch: true,
    answer: { kind: "json", schema: CatalogAppliedSchema, description: "applied at this sequence" },
    errors: [400, 412, 413, 415, 503, 504],
  },
  {
    method: "PATCH",
    url: "/v1/models/:model",
    operationId: "scaleModel",
    tag: "catalog",
    access: "admin",
    summary:
      "Scale a model: a catalog change with its new replica count (fenced like PUT /v1/catalog). Scale-down takes replicas out of the routing table, then drains them.",
    id: "model",
    body: modelPatchBody,
    ifMatch: true,
    answer: { kind: "json", schema: ModelScaledSchema, description: "applied at this sequence" },
    errors: [400, 404, 412, 503, 504],
  },
];
