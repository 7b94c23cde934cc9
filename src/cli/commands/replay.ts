/**
 * `llmgw replay`: the fleet at any point of the log, folded from the start
 * or from the nearest earlier snapshot.
 */
import { type Command, Option } from "commander";
import { invalidNodeIdReason } from "../../ids/index.js";
import {
  canonicalJson,
  type FleetJson,
  type FleetState,
  filterFleet,
  fleetProjection,
} from "../../projections/index.js";
import { openKvSnapshotStore, replay } from "../../projections/runtime/index.js";
import { readVia } from "../api-access.js";
import { CliError, intArg, type NatsSecurityFlags, snapshotBucketOption } from "../common.js";
import { ProgressLine } from "../progress.js";
import { openLogForReading } from "../read-log.js";
import { renderFleet } from "../render/fleet-text.js";
import { isoTime, timeArg } from "../time.js";
import { withLogOrApiOptions } from "./log-options.js";
import { type ApiFlags, call, clientFor } from "./operator-common.js";

interface ReplayFlags extends NatsSecurityFlags, ApiFlags {
  nats: string;
  stream: string;
  archive?: string;
  subjectPrefix: string;
  untilSeq?: number;
  untilTime?: number;
  node?: string;
  replica?: string;
  snapshots: boolean;
  snapshotBucket: string;
}

export function registerReplay(program: Command): void {
  const cmd = withLogOrApiOptions(program.command("replay"));
  cmd
    .description(
      "show the fleet at any point of the log: nodes, GPUs, replicas, shards, pending reasons " +
        "(what the stream no longer holds is read from the archive, from its nearest snapshot).\n" +
        "Folded by the operator API (--api, LLMGW_API_URL or the current context; a viewer token), or here from NATS with --nats on the command line",
    )
    .addOption(
      new Option("--until-seq <n>", "fold up to and including this sequence (default: the end)")
        .argParser(intArg("--until-seq"))
        .conflicts("untilTime"),
    )
    .addOption(
      new Option("--until-time <time>", "fold events stored up to this time (ISO 8601 or ms since the epoch)")
        .argParser(timeArg("--until-time"))
        .conflicts("untilSeq"),
    )
    .option("--node <id>", "only this node (its DNS name, as typed) and the replicas with a shard on it")
    .option("--replica <id>", "only this replica and the nodes its shards are on")
    .option("--json", "canonical JSON of the (filtered) state and the sequence and time it covers")
    .option("--no-snapshots", "fold the whole log (the archive's part too), ignoring snapshots (with --nats)")
    .addOption(snapshotBucketOption())
    .action(async (flags: ReplayFlags, self: Command) => {
      const badNode = flags.node === undefined ? undefined : invalidNodeIdReason(flags.node);
      if (badNode) throw new CliError(`invalid --node: ${badNode}`);
      if (readVia(self) === "api") await runReplayViaApi(flags);
      else await runReplay(flags);
    });
}

/** The same fleet, folded by the operator API (GET /v1/replay): a token and no NATS credentials. */
async function runReplayViaApi(flags: ReplayFlags): Promise<void> {
  const client = clientFor(flags);
  const query = {
    ...(flags.untilSeq === undefined ? {} : { at: flags.untilSeq }),
    ...(flags.untilTime === undefined ? {} : { time: new Date(flags.untilTime).toISOString() }),
    ...(flags.node === undefined ? {} : { node: flags.node }),
    ...(flags.replica === undefined ? {} : { replica: flags.replica }),
  };
  const { body } = await call(() => client.send((api) => api.GET("/v1/replay", { params: { query } })));
  if (flags.untilSeq !== undefined && flags.untilSeq > body.lastSeq) {
    process.stderr.write(`the log ends at sequence ${body.lastSeq}; showing the fleet there\n`);
  }
  // The document gives the state as the projection's own JSON form, not field by field.
  printReplay(flags, fleetProjection.revive(body.state as unknown as FleetJson), {
    seq: body.seq,
    timeMs: body.timeMs,
  });
}

function printReplay(flags: ReplayFlags, state: FleetState, at: { seq: number; timeMs: number }): void {
  if (flags.json) {
    process.stdout.write(
      `${canonicalJson({ seq: at.seq, timeMs: at.timeMs, time: isoTime(at.timeMs), state })}\n`,
    );
  } else {
    process.stdout.write(renderFleet(state, at));
  }
}

async function runReplay(flags: ReplayFlags): Promise<void> {
  const log = await openLogForReading(flags, "llmgw replay");
  try {
    const snapshots = flags.snapshots
      ? await openKvSnapshotStore<FleetState>(log, { bucket: flags.snapshotBucket, create: false })
      : undefined;
    const progress = new ProgressLine(process.stderr);
    const ac = new AbortController();
    const onSigint = () => ac.abort();
    process.once("SIGINT", onSigint);
    let result: Awaited<ReturnType<typeof replay<FleetState>>>;
    try {
      result = await replay(log, fleetProjection, {
        ...(flags.untilSeq === undefined ? {} : { untilSeq: flags.untilSeq }),
        ...(flags.untilTime === undefined ? {} : { untilTimeMs: flags.untilTime }),
        ...(snapshots ? { snapshots } : {}),
        archiveSnapshots: flags.snapshots,
        signal: ac.signal,
        onProgress: (p) => progress.update(p),
        onMalformed: (err) => progress.note(`malformed message at sequence ${err.seq}: ${err.message}`),
        onRefused: (r) =>
          progress.note(`refused ${r.kind} at sequence ${r.seq} on ${r.subject}, not folded: ${r.reason}`),
      });
    } finally {
      process.off("SIGINT", onSigint);
      progress.done();
    }
    if (ac.signal.aborted) throw new CliError(`replay interrupted at sequence ${result.seq}`, 130);
    if (result.snapshot) progress.note(`started from the snapshot at sequence ${result.snapshot.seq}`);
    if (result.unknownKinds > 0) {
      progress.note(
        `passed over ${result.unknownKinds} event(s) of a kind this version does not know (a newer llmgw wrote them); upgrade to fold them`,
      );
    }
    if (flags.untilSeq !== undefined && flags.untilSeq > result.streamLastSeq) {
      progress.note(`the log ends at sequence ${result.streamLastSeq}; showing the fleet there`);
    }

    const state = result.state;
    if (flags.node !== undefined && !state.inventory.nodes.get(flags.node)) {
      throw new CliError(
        `no such node ${JSON.stringify(flags.node)} in the log up to sequence ${result.seq}${known(state.inventory.nodes.keys())}`,
      );
    }
    if (flags.replica !== undefined && !state.replicas.replicas.get(flags.replica)) {
      throw new CliError(
        `no such replica ${JSON.stringify(flags.replica)} in the log up to sequence ${result.seq}${known(state.replicas.replicas.keys())}`,
      );
    }
    const filtered = filterFleet(state, {
      ...(flags.node === undefined ? {} : { nodeId: flags.node }),
      ...(flags.replica === undefined ? {} : { replicaId: flags.replica }),
    });
    printReplay(flags, filtered, { seq: result.seq, timeMs: result.timeMs });
  } finally {
    await log.close();
  }
}

function known(ids: readonly string[]): string {
  if (ids.length === 0) return " (it holds none)";
  const sorted = [...ids].sort();
  return ` (known: ${sorted.slice(0, 10).join(", ")}${sorted.length > 10 ? `, … ${sorted.length - 10} more` : ""})`;
}
