/** `llmgw rollout status|pause|resume|undo MODEL`: a model's rollout, through the operator API. */
import type { Command } from "commander";
import type { RolloutView } from "../../operator/index.js";
import { NAME_PATTERN } from "../../operator/index.js";
import { CliError } from "../common.js";
import { type ApiFlags, call, clientFor, formatTable, printJson, withApiOptions } from "./operator-common.js";

/** `<model>` checked against the catalog's name rule (the client encodes it into the path). */
function modelArg(model: string): string {
  if (!NAME_PATTERN.test(model))
    throw new CliError(
      `invalid <model> ${JSON.stringify(model)}: 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit`,
    );
  return model;
}

/** One model's rollout for people: where it stands, then old/new counts. */
export function rolloutText(r: RolloutView): string {
  const state = r.paused
    ? `paused by ${r.pausedBy || "-"}${r.pauseReason ? `: ${r.pauseReason}` : ""}`
    : r.stalled
      ? `stalled (since log sequence ${r.stalled.seq}): ${r.stalled.reason}`
      : r.active
        ? `rolling (started at log sequence ${r.startedSeq})`
        : r.completedSeq > 0
          ? `complete (at log sequence ${r.completedSeq})`
          : "no rollout";
  const p = r.policy;
  const table = formatTable(
    ["REVISION", "REPLICAS", "READY"],
    [
      [`${r.revision} (current)`, String(r.current.replicas), String(r.current.ready)],
      ["older", String(r.outdated.replicas), String(r.outdated.ready)],
      ["draining", String(r.draining), "-"],
    ],
  );
  return [
    `${r.model}: ${state}`,
    `ready ${r.ready}/${r.desired}; maxSurge ${p.maxSurge}, maxUnavailable ${p.maxUnavailable}, progress deadline ${Math.round(p.progressDeadlineMs / 1000)}s`,
    table,
  ].join("\n");
}

export function registerRollout(program: Command): void {
  const rollout = program
    .command("rollout")
    .description("a model's rollout after a spec change: status, pause, resume, undo");

  withApiOptions(
    rollout
      .command("status")
      .description(
        "where a model's rollout stands: revision, stalled or paused and why, old/new replica counts",
      )
      .argument("<model>", "model name from the catalog"),
  ).action(async (model: string, flags: ApiFlags) => {
    const client = clientFor(flags);
    const { body } = await call(() =>
      client.send((api) => api.GET("/v1/rollouts/{model}", { params: { path: { model: modelArg(model) } } })),
    );
    if (flags.json) return printJson(body);
    process.stdout.write(`${rolloutText(body.rollout)}\n`);
  });

  for (const action of ["pause", "resume"] as const) {
    const cmd = rollout
      .command(action)
      .description(
        action === "pause"
          ? "stop replacing the model's replicas where the rollout is (recorded in the log)"
          : "let a paused rollout go on",
      )
      .argument("<model>", "model name from the catalog");
    if (action === "pause") cmd.option("--reason <text>", "why, recorded in the log");
    withApiOptions(cmd).action(async (model: string, flags: ApiFlags & { reason?: string }) => {
      const client = clientFor(flags);
      const body = flags.reason === undefined ? {} : { reason: flags.reason };
      const path = { model: modelArg(model) };
      const { body: res } = await call(() =>
        client.send((api) =>
          action === "pause"
            ? api.POST("/v1/rollouts/{model}/pause", { params: { path }, body })
            : api.POST("/v1/rollouts/{model}/resume", { params: { path }, body }),
        ),
      );
      if (flags.json) return printJson(res);
      process.stdout.write(`rollout of ${model} ${action}d (log sequence ${res.seq})\n`);
    });
  }

  withApiOptions(
    rollout
      .command("undo")
      .description(
        "re-apply the model's previous spec from the log's catalog history (its replica count and the rest of the catalog stay)",
      )
      .argument("<model>", "model name from the catalog"),
  ).action(async (model: string, flags: ApiFlags) => {
    const client = clientFor(flags);
    const { body: res } = await call(() =>
      client.send((api) =>
        api.POST("/v1/rollouts/{model}/undo", { params: { path: { model: modelArg(model) } }, body: {} }),
      ),
    );
    if (flags.json) return printJson(res);
    process.stdout.write(
      `${model} back to revision ${res.revision} (its spec at log sequence ${res.fromSeq}), catalog applied at log sequence ${res.seq}\n`,
    );
  });
}
