import type { Command, Decision } from "../../gen/llmgw/v1/events_pb.js";
import type { FleetView } from "../../projections/index.js";
import type { ReconcilerConfig } from "./config.js";

export interface DecideInput {
  /** The projected fleet, read-only: a pass folds into a fork of it (projections/fork.ts). */
  state: FleetView;
  config: ReconcilerConfig;
  /** The decision time (ms since the epoch): decide reads no clock. */
  nowMs: number;
  /** Gateway ids whose KV lease is live right now (the runner watches the bucket). */
  liveGateways: ReadonlySet<string>;
}

export interface DecideOutput {
  decisions: Decision[];
  commands: Command[];
  /** The pass hit maxDecisionsPerPass or maxPassBytes; what did not fit is left to the next pass. */
  truncated: boolean;
  /**
   * Earliest future time (ms) at which a pass would decide something new
   * (expiry, retry, backoff end, cooldown end, drain deadline), or null.
   */
  nextDeadlineMs: number | null;
}
