/**
 * The runner in-process against a real nats-server, with a stand-in for
 * decide that asks for one pass whenever the test allows it. What is under
 * test is the runner's fencing and stepping down, not placement.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { DecisionSchema, EventSchema, Writer_Kind } from "../../src/gen/llmgw/v1/events_pb.js";
import { type Log, openLog } from "../../src/log/index.js";
import { cloneFleet, type FleetState, fleetProjection } from "../../src/projections/index.js";
import { ProjectionRuntime } from "../../src/projections/runtime/index.js";
import {
  type DecideFn,
  type FollowedProjection,
  RunnerMetrics,
  type StepDown,
} from "../../src/reconciler/runner/index.js";
import { type NatsServer, startServer, uniqueStream } from "../harness/nats.js";
import { eventually } from "../support/eventually.js";
import { testCordon } from "../support/fleet-events.js";
import { withInProcessRunner } from "../support/in-process-runner.js";

/** A view of the projection the test can freeze: a leader deciding on an old state. */
class FreezableView implements FollowedProjection<FleetState> {
  #frozen: { state: FleetState; seq: number } | null = null;
  constructor(private readonly rt: ProjectionRuntime<FleetState>) {}
  get state() {
    return this.#frozen?.state ?? this.rt.state;
  }
  get lastSeq() {
    return this.#frozen?.seq ?? this.rt.lastSeq;
  }
  freeze() {
    this.#frozen = { state: cloneFleet(this.rt.state), seq: this.rt.lastSeq };
  }
  thaw() {
    this.#frozen = null;
  }
  waitFor(seq: number, opts?: { timeoutMs?: number }) {
    return this.rt.waitFor(seq, opts);
  }
  onChange(l: (seq: number) => void) {
    return this.rt.onChange(l);
  }
}

function pass(id: string, leaderId: string) {
  return create(EventSchema, {
    id,
    timeUnixMs: BigInt(Date.now()),
    writer: { kind: Writer_Kind.RECONCILER, id: leaderId },
    body: {
      case: "reconcilePass",
      value: {
        leaderId,
        trigger: "test",
        decisions: [
          { explanation: "foreign", kind: { case: "replicaPending", value: { replicaId: "x", model: "m" } } },
        ],
      },
    },
  });
}

async function passesIn(log: Log) {
  const out: Array<{ seq: number; leaderId: string }> = [];
  for await (const r of log.read({ subjects: [log.subjects.reconciler] })) {
    if (r.event.body.case === "reconcilePass")
      out.push({ seq: r.seq, leaderId: r.event.body.value.leaderId });
  }
  return out;
}

describe("reconciler runner: fencing by the log", () => {
  let server: NatsServer & { close(): Promise<void> };
  before(async () => {
    server = await startServer();
  });
  after(async () => {
    await server?.close();
  });

  it("steps down when another pass took its log position, then leads again from the new position", async () => {
    const log = await openLog({
      url: server.url,
      clientName: "test",
      name: uniqueStream(),
      prefix: `t${Math.random().toString(36).slice(2, 8)}.evt`,
    });
    const rt = new ProjectionRuntime(log, fleetProjection);
    const view = new FreezableView(rt);
    let allowed = 1;
    let made = 0;
    const decide: DecideFn<null> = () => {
      if (made >= allowed) return { decisions: [], commands: [], truncated: false, nextDeadlineMs: null };
      made++;
      return {
        decisions: [
          create(DecisionSchema, {
            explanation: `probe ${made}`,
            kind: { case: "replicaPending", value: { replicaId: "probe", model: "m" } },
          }),
        ],
        commands: [],
        truncated: false,
        nextDeadlineMs: null,
      };
    };
    const metrics = new RunnerMetrics();
    const stepDowns: StepDown[] = [];
    await withInProcessRunner(
      rt,
      {
        log,
        projection: view,
        decide,
        config: null,
        metrics,
        triggers: { debounceMs: 20, maxDelayMs: 200, tickMs: 60_000 },
        stepDownCooldownMs: 300,
      },
      async (runner) => {
        runner.onStepDown((s) => stepDowns.push(s));
        runner.start();

        // The startup pass.
        await eventually(() => rt.state.replicas.lastPass?.leaderId === "rec-a", {
          what: "rec-a's first pass",
        });
        const first = rt.state.replicas.lastPass!.seq;

        // rec-a's view stops at its own pass while a foreign pass lands behind its back.
        view.freeze();
        const foreign = await log.append(pass("foreign-1", "intruder"), { expectLastSubjectSeq: first });
        allowed = 2;
        await log.append(testCordon("wake-up"));
        await eventually(() => stepDowns.length > 0, { what: "rec-a to step down" });
        assert.equal(stepDowns[0]?.reason, "fencing-conflict");
        assert.equal((await metrics.fencingConflicts.get()).values[0]?.value, 1);
        assert.deepEqual(
          (await passesIn(log)).map((p) => p.leaderId),
          ["rec-a", "intruder"],
          "the stale pass was not appended",
        );

        // Its view catches up; after the cool-down it leads again and fences on the foreign pass.
        view.thaw();
        allowed = 3;
        await eventually(async () => (await passesIn(log)).length === 3, { what: "rec-a to lead again" });
        const passes = await passesIn(log);
        assert.equal(passes[2]?.leaderId, "rec-a");
        assert.ok(passes[2]!.seq > foreign.seq);
        assert.equal(runner.role, "leader");
      },
    );
  });
});
