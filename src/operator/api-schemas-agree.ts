/**
 * The API's schemas (api-schemas.ts) and the types the server's views are
 * written in must agree: a field added to a view and not to its schema (or
 * the other way round) fails the type check here, before the test that
 * compares real answers with the OpenAPI document.
 */
import type { z } from "zod";
import type { EndpointEntry } from "../projections/index.js";
import type { PendingDecision, PlacementDecision } from "../reconciler/explain/index.js";
import type {
  EndpointEntrySchema,
  ExplainSchema,
  HistorySchema,
  ModelReadinessSchema,
  NodeViewSchema,
  PendingSchema,
  PlacementSchema,
  ReplicaViewSchema,
  RolloutViewSchema,
} from "./api-schemas.js";
import type { ExplainedTouch, HistoryEntry } from "./explain.js";
import type { RolloutView } from "./rollouts-view.js";
import type { ModelReadiness, NodeView, ReplicaView } from "./views.js";

type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
type Agree<T extends true> = T;

export type SchemasAgreeWithViews = [
  Agree<Same<z.output<typeof NodeViewSchema>, NodeView>>,
  Agree<Same<z.output<typeof ReplicaViewSchema>, ReplicaView>>,
  Agree<Same<z.output<typeof RolloutViewSchema>, RolloutView>>,
  Agree<Same<z.output<typeof ModelReadinessSchema>, ModelReadiness>>,
  Agree<Same<z.output<typeof EndpointEntrySchema>, EndpointEntry>>,
  Agree<Same<z.output<typeof PlacementSchema>, PlacementDecision>>,
  Agree<Same<z.output<typeof PendingSchema>, PendingDecision>>,
  Agree<Same<z.output<typeof HistorySchema>["history"][number], HistoryEntry>>,
  Agree<Same<z.output<typeof ExplainSchema>["decisions"][number], ExplainedTouch>>,
];
