/**
 * What the runner needs from its collaborators, as structural types: the
 * pure `decide` of src/reconciler/decide and a followed projection (the
 * projection runtime). Tests can hand in their own.
 */
import type { Command, Decision } from "../../gen/llmgw/v1/events_pb.js";
import type { FleetState } from "../../projections/index.js";

export interface DecideInputOf<C> {
  state: FleetState;
  config: C;
  nowMs: number;
  liveGateways: ReadonlySet<string>;
}

export interface DecideResult {
  decisions: Decision[];
  commands: Command[];
  truncated: boolean;
  nextDeadlineMs: number | null;
}

/** Pure: the same input gives the same output; no decisions and no commands = nothing to do. */
export type DecideFn<C> = (input: DecideInputOf<C>) => DecideResult;

/** A projection followed live (ProjectionRuntime satisfies it). */
export interface FollowedProjection<S> {
  readonly state: S;
  readonly lastSeq: number;
  waitFor(seq: number, opts?: { timeoutMs?: number; signal?: AbortSignal }): Promise<void>;
  onChange(listener: (seq: number) => void): () => void;
}

/** The set of gateways whose lease is alive. */
export interface GatewaySet {
  readonly ids: ReadonlySet<string>;
  onChange(listener: () => void): () => void;
  /**
   * Reads the leases of `ids` directly and adds those alive to the set. The
   * set follows the bucket through a watch and listings, which reach the
   * leader on another path than the log: a gateway's GatewayStarted can be
   * folded before its lease shows in the set, and the pass would expire it.
   */
  confirm?(ids: readonly string[]): Promise<void>;
}
