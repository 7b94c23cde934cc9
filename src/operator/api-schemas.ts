/**
 * The shapes of the operator API's answers, as zod schemas. They are the
 * source of the OpenAPI document (`GET /openapi.json`, built by openapi.ts)
 * and are checked against the real answers by test/operator/openapi.test.ts,
 * so a field added to a view without its schema fails that test. Each schema
 * with an `id` becomes one entry of the document's `components.schemas`.
 *
 * This file imports nothing but zod, so the web UI imports its types from
 * here (src/operator/ui/types.ts): the UI is type-checked against the API's
 * own answers, and its build fails when they drift. That the schemas agree
 * with the server's view types is checked in api-schemas-agree.ts.
 */
import { z } from "zod";

/** Schemas named in the document, by id. */
export const apiSchemaRegistry = z.registry<{ id: string; description?: string }>();

function named<T extends z.ZodType>(id: string, schema: T, description?: string): T {
  apiSchemaRegistry.add(schema, description === undefined ? { id } : { id, description });
  return schema;
}

const seq = z.int().min(0);
const ms = z.number();

export const ErrorBodySchema = named(
  "Error",
  z.object({
    error: z.object({
      code: z.enum([
        "unauthorized",
        "forbidden",
        "invalid-argument",
        "invalid-catalog",
        "not-found",
        "precondition-failed",
        "conflict",
        "unsupported-media-type",
        "payload-too-large",
        "log-unavailable",
        "not-ready",
        "timeout",
        "gone",
        "agent-unavailable",
        "internal",
      ]),
      message: z.string(),
      issues: z.array(z.object({ path: z.string(), message: z.string() })).optional(),
      seq: seq.optional(),
    }),
  }),
  "Every error: clients branch on `code`, people read `message`.",
);

export const GpuViewSchema = named(
  "GpuView",
  z.object({
    index: z.int(),
    uuid: z.string(),
    product: z.string(),
    memoryTotalMb: z.number(),
    memoryUsedMb: z.number(),
    problems: z.array(z.string()),
    faults: z.array(
      z.object({
        kind: z.enum(["xid", "ecc", "thermal", "retired-pages", "other", "unspecified"]),
        message: z.string(),
      }),
    ),
    cordoned: z.boolean(),
    cordonReason: z.string(),
    shards: z.array(
      z.object({ replicaId: z.string(), shardId: z.string(), model: z.string(), state: z.string() }),
    ),
  }),
);

export const NodeViewSchema = named(
  "NodeView",
  z.object({
    nodeId: z.string(),
    liveness: z.enum(["connected", "disconnected", "suspect", "lost"]),
    agentVersion: z.string(),
    advertiseAddress: z
      .string()
      .describe("The host name or IP address other nodes reach it at; empty when it advertised none."),
    labels: z.record(z.string(), z.string()),
    cordoned: z.boolean(),
    cordonReason: z.string(),
    draining: z.boolean(),
    session: z
      .object({ sessionId: z.string(), gatewayId: z.string(), openedSeq: seq, identity: z.string() })
      .nullable(),
    disconnectedSinceMs: ms.nullable(),
    lastCloseReason: z.string(),
    nodeProblems: z.array(z.string()),
    fabrics: z.array(z.object({ name: z.string(), kind: z.string(), gpuIndices: z.array(z.int()) })),
    gpus: z.array(GpuViewSchema),
    gpusTotal: z.int(),
    gpusUsed: z.int(),
    replicaIds: z.array(z.string()),
    waitingOn: z
      .array(
        z.object({
          replicaId: z.string(),
          model: z.string(),
          replacementId: z.string(),
          blockedByBudget: z.boolean(),
          reason: z.string(),
        }),
      )
      .describe(
        "Replicas that must leave the node (it drains, or a GPU has a problem) and still serve there, with what each waits on.",
      ),
    lastChangeSeq: seq,
  }),
  "A node with which shards hold each of its GPUs.",
);

export const ShardSchema = named(
  "Shard",
  z.object({
    shardId: z.string(),
    rank: z.int(),
    nodeId: z.string(),
    sessionId: z.string(),
    gpuIndices: z.array(z.int()),
    state: z.enum(["pending", "unspecified", "starting", "running", "draining", "stopped", "failed"]),
    desired: z.enum(["running", "draining", "stopped"]),
    adopted: z.boolean(),
    lastError: z.string(),
    exitCode: z.int(),
    endpoint: z.string(),
    lastOutput: z.string(),
    fault: z
      .object({ kind: z.enum(["start-refused", "failed", "unrequested-stop"]), message: z.string() })
      .nullable(),
    startCommandId: z.string(),
    startAttempts: z.int(),
    startDueMs: ms,
    startingSinceMs: ms,
    lastChangeSeq: seq,
    load: z
      .object({
        samples: z.array(z.object({ atMs: ms, queueDepth: z.int().min(0), kvCacheUse: z.number() })),
        seq,
      })
      .optional()
      .describe("The load the shard's engine last reported (one sample; absent until it reports any)."),
  }),
);

export const ReplicaViewSchema = named(
  "ReplicaView",
  z.object({
    replicaId: z.string(),
    model: z.string(),
    profile: z.string(),
    revision: z.string().describe("spec revision of its profile when placed; empty while never placed"),
    createdMs: ms,
    phase: z.enum(["pending", "placed", "running", "draining"]),
    createdSeq: seq,
    shards: z.array(ShardSchema),
    replaces: z.string(),
    replacedBy: z.string(),
    pendingReason: z.string(),
    drainReason: z.string(),
    drainStartedMs: ms,
    restarts: z.int(),
    backoffUntilMs: ms,
    lastFailure: z
      .object({
        reason: z.string(),
        message: z.string(),
        nodeId: z.string(),
        shardId: z.string(),
        exitCode: z.int(),
        lastOutput: z.string(),
        seq,
      })
      .nullable(),
    lastChangeSeq: seq,
    nodeIds: z.array(z.string()),
    ready: z.boolean(),
    disruptionBlocked: z
      .string()
      .describe(
        "Why its model's disruption budget keeps it serving where it must leave; empty when it does not.",
      ),
  }),
  "A replica and its shards; `ready` means every shard reports RUNNING and none is draining or stopping.",
);

export const ModelReadinessSchema = named(
  "ModelReadiness",
  z.object({
    model: z.string(),
    ready: z.int().min(0),
    desired: z.int().min(0),
    minAvailable: z
      .string()
      .describe('The disruption budget as the catalog states it ("2", "75%"); empty: none.'),
    keepsReady: z.int().min(0).describe("Ready replicas the budget keeps at the desired count; 0: none."),
  }),
);

const CandidateSchema = z.object({ nodeIds: z.array(z.string()), score: z.number() });

export const PlacementSchema = named(
  "PlacementDecision",
  z.object({
    seq,
    timeMs: ms,
    profile: z.string(),
    policy: z.string(),
    chosen: CandidateSchema.nullable(),
    runnersUp: z.array(CandidateSchema),
    nodes: z.array(z.object({ nodeId: z.string(), gpuIndices: z.array(z.int()) })),
    explanation: z.string(),
  }),
);

export const PendingSchema = named(
  "PendingDecision",
  z.object({
    seq,
    timeMs: ms,
    nodesConsidered: z.int(),
    nodesFit: z.int(),
    ruledOut: z.array(z.object({ reason: z.string(), nodes: z.int() })),
    explanation: z.string(),
  }),
);

export const ExplainSchema = named(
  "ReplicaExplanation",
  z.object({
    seq,
    lastSeq: seq,
    replicaId: z.string(),
    replica: ReplicaViewSchema.nullable(),
    decisions: z.array(
      z.object({
        seq,
        timeMs: ms,
        leaderId: z.string(),
        trigger: z.string(),
        kind: z.string(),
        text: z.string(),
      }),
    ),
    placement: PlacementSchema.nullable(),
    pending: PendingSchema.nullable(),
  }),
);

const TouchSchema = z.object({
  seq,
  timeMs: ms,
  kind: z.string(),
  text: z.string(),
  detail: z.string().optional(),
});

export const ReplicaDecisionsSchema = named(
  "ReplicaDecisions",
  z.object({ replica: z.string(), decisions: z.array(TouchSchema) }),
  "The recorded decisions and commands that touched a replica (what `llmgw explain replica` prints).",
);

export const NodeDecisionsSchema = named(
  "NodeDecisions",
  z.object({ node: z.string(), decisions: z.array(TouchSchema) }),
  "The recorded decisions and commands that touched a node (what `llmgw explain node` prints).",
);

export const ReplaySchema = named(
  "Replay",
  z.object({
    seq,
    timeMs: ms,
    time: z.string(),
    lastSeq: seq,
    state: z
      .looseObject({ inventory: z.looseObject({}), replicas: z.looseObject({}) })
      .describe("The folded fleet state (the projection's own shape, as `llmgw replay --json` prints it)."),
  }),
);

export const HistorySchema = named(
  "ReplicaHistory",
  z.object({
    seq,
    replicaId: z.string(),
    history: z.array(
      z.object({ seq, timeMs: ms, kind: z.string(), text: z.string(), nodeId: z.string().optional() }),
    ),
  }),
);

const countPair = z.object({ replicas: z.int().min(0), ready: z.int().min(0) });

export const RolloutViewSchema = named(
  "RolloutView",
  z.object({
    model: z.string(),
    revision: z.string().describe("the model's current spec revision"),
    desired: z.int().min(0),
    ready: z.int().min(0),
    policy: z.object({
      maxSurge: z.int().min(0),
      maxUnavailable: z.int().min(0),
      progressDeadlineMs: ms,
    }),
    active: z.boolean().describe("started and not completed"),
    paused: z.boolean(),
    pausedBy: z.string(),
    pauseReason: z.string(),
    stalled: z.object({ replicaId: z.string(), reason: z.string(), seq }).nullable(),
    startedSeq: seq,
    completedSeq: seq,
    current: countPair.describe("replicas (not draining) on the current revision"),
    outdated: countPair.describe("replicas (not draining) on an older revision"),
    draining: z.int().min(0),
  }),
  "A model's rollout: its revision, policy, state and replicas per revision.",
);

export const FleetSchema = named(
  "Fleet",
  z.object({
    seq,
    timeMs: ms,
    lastSeq: seq,
    nodes: z.array(NodeViewSchema),
    replicas: z.array(ReplicaViewSchema),
    catalog: z.object({ seq, models: z.array(z.string()) }),
    readiness: z.array(ModelReadinessSchema),
    rollouts: z.array(RolloutViewSchema),
    lastPass: z.object({ seq, leaderId: z.string(), observedSeq: seq, nowMs: ms }).nullable(),
  }),
  "The fleet at one position of the log.",
);

export const EventsPageSchema = named(
  "EventsPage",
  z.object({
    events: z.array(
      z.object({
        seq,
        timeMs: ms,
        subject: z.string(),
        kind: z.string().optional(),
        text: z.string().optional(),
        nodeIds: z.array(z.string()).optional(),
        replicaIds: z.array(z.string()).optional(),
        event: z
          .record(z.string(), z.unknown())
          .optional()
          .describe("The llmgw.v1.Event as protobuf JSON (proto/llmgw/v1/events.proto)."),
        malformed: z.string().optional(),
        refused: z
          .string()
          .optional()
          .describe(
            "Set when the event was stored on a subject its kind may not be written to: why. It was never folded.",
          ),
      }),
    ),
    next: seq.nullable(),
    lastSeq: seq,
  }),
);

export const CatalogAppliedSchema = named(
  "CatalogApplied",
  z.object({ seq, models: z.array(z.object({ name: z.string(), replicas: z.int() })) }),
);

export const ModelScaledSchema = named(
  "ModelScaled",
  z.object({
    seq,
    model: z.string(),
    replicas: z.int().describe("The replica count now in the catalog."),
    previous: z.int().describe("The count it replaced."),
  }),
);

export const RolloutsSchema = named("Rollouts", z.object({ seq, rollouts: z.array(RolloutViewSchema) }));

export const RolloutSchema = named("Rollout", z.object({ seq, rollout: RolloutViewSchema }));

export const RolloutUndoneSchema = named(
  "RolloutUndone",
  z.object({
    seq,
    fromSeq: seq.describe("the catalog version whose spec of the model was re-applied"),
    revision: z.string().describe("the model's revision after the undo"),
    rollout: RolloutViewSchema,
  }),
);

export const CatalogHistorySchema = named(
  "CatalogHistory",
  z.object({
    seq,
    history: z.array(
      z.object({
        seq,
        timeMs: ms,
        appliedBy: z.string(),
        models: z.array(z.object({ name: z.string(), replicas: z.int().min(0), revision: z.string() })),
      }),
    ),
  }),
  "Every catalog applied, oldest first, with each model's spec revision.",
);

export const WhatIfResultSchema = named(
  "WhatIfResult",
  z.object({
    config: z.record(z.string(), z.unknown()).describe("The whole reconciler config the run used."),
    compared: z.int(),
    differing: z.int(),
    passes: z.array(
      z.object({
        seq,
        nowMs: ms,
        differences: z.array(
          z.object({
            subject: z.string(),
            record: z.string(),
            alternative: z.string(),
            nodes: z.array(z.string()),
          }),
        ),
      }),
    ),
  }),
);

export const EndpointEntrySchema = named(
  "EndpointEntry",
  z.object({ replicaId: z.string(), url: z.string(), nodeId: z.string() }),
  "A ready replica and where its rank 0 serves.",
);

export const EndpointsSchema = named(
  "Endpoints",
  z.union([
    z.object({ seq, endpoints: z.record(z.string(), z.array(EndpointEntrySchema)) }),
    z.object({ seq, model: z.string(), endpoints: z.array(EndpointEntrySchema) }),
  ]),
  "The routing table by model, or (with `model`) one model's list.",
);

export const NodesSchema = named("Nodes", z.object({ seq, nodes: z.array(NodeViewSchema) }));
export const NodeSchema = named("Node", z.object({ seq, node: NodeViewSchema }));
export const ReplicasSchema = named(
  "Replicas",
  z.object({ seq, models: z.array(ModelReadinessSchema), replicas: z.array(ReplicaViewSchema) }),
);
export const ReplicaSchema = named("Replica", z.object({ seq, replica: ReplicaViewSchema }));
export const HealthSchema = named("Health", z.object({ status: z.literal("ok") }));
export const ReadySchema = named("Ready", z.object({ status: z.literal("ready"), seq }));

export const RouterRequestsSchema = named(
  "RouterRequests",
  z.object({
    routers: z.array(
      z.object({
        url: z.string(),
        readAtMs: z.int(),
        error: z.string().optional(),
      }),
    ),
    replicas: z.array(
      z.object({
        replicaId: z.string(),
        model: z.string(),
        requests: z.number().min(0),
        inFlight: z.number().min(0),
        errors: z.number().min(0),
      }),
    ),
  }),
  "Requests per replica as the routers the API reads (`--router-url`) count them: answered in total, in flight now, failed; summed over the routers, each with when it was read or why it could not be.",
);
