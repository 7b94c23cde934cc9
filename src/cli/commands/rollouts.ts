/** `llmgw rollouts`: every model's rollout in one list, through the operator API. */
import type { Command } from "commander";
import type { RolloutView } from "../../operator/index.js";
import { showList } from "./list-output.js";
import { type ApiFlags, formatTable, withApiOptions, withOutputOption } from "./operator-common.js";

function rolloutState(r: RolloutView): string {
  if (r.paused) return "paused";
  if (r.stalled) return "stalled";
  if (r.active) return "rolling";
  return r.completedSeq > 0 ? "complete" : "-";
}

export function rolloutsTable(rollouts: RolloutView[], wide: boolean): string {
  const header = ["MODEL", "REVISION", "STATE", "READY", "CURRENT", "OLDER", "DRAINING"];
  return formatTable(
    wide ? [...header, "POLICY", "WHY"] : header,
    rollouts.map((r) => {
      const row = [
        r.model,
        r.revision,
        rolloutState(r),
        `${r.ready}/${r.desired}`,
        `${r.current.ready}/${r.current.replicas}`,
        `${r.outdated.ready}/${r.outdated.replicas}`,
        String(r.draining),
      ];
      if (!wide) return row;
      const p = r.policy;
      const why = r.paused ? `${r.pausedBy}: ${r.pauseReason}` : (r.stalled?.reason ?? "");
      return [...row, `surge ${p.maxSurge}, unavailable ${p.maxUnavailable}`, why];
    }),
  );
}

export function registerRollouts(program: Command): void {
  withOutputOption(
    withApiOptions(
      program
        .command("rollouts")
        .description(
          "list every model's rollout: revision, state, ready/desired, replicas on the current and older revisions (one model in full: llmgw rollout status MODEL)",
        ),
    ),
  ).action((flags: ApiFlags) =>
    showList(flags, (c) => c.send((api) => api.GET("/v1/rollouts")), {
      table: (b, wide) => rolloutsTable(b.rollouts, wide),
    }),
  );
}
