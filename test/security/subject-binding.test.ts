/**
 * Subject ↔ kind binding against a real nats-server running the
 * authorization `llmgw nats-auth init` writes. With each role's own
 * credentials, every event kind is published raw (`js.publish` of an
 * encoded envelope, as an attacker holding the credentials would) to every
 * log subject the role may publish to. The server stores them all; the
 * kinds that do not belong on the subject are never folded: replay (the
 * CLI), the projection runtime (what the reconciler and the API fold), the
 * API's fleet history and what-if's reader all pass them over, the runtime
 * counts them in `llmgw_projection_events_refused_total`, `llmgw events`
 * shows them as refused and `llmgw check-log` names each one (seq, subject,
 * kind) and exits 1. The fleet state is byte-identical to the state
 * without them.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { clone } from "@bufbuild/protobuf";
import { type JetStreamClient, jetstream } from "@nats-io/jetstream";
import { Registry } from "prom-client";
import { EVENT_KINDS, type EventKind, encodeEvent } from "../../src/codec/index.js";
import { type Event, EventSchema } from "../../src/gen/llmgw/v1/events_pb.js";
import { nodeIdToken } from "../../src/ids/index.js";
import {
  isLogError,
  KIND_SUBJECTS,
  type Log,
  logErrorFrom,
  SUBJECT_WRITERS,
  Subjects,
  subjectFor,
} from "../../src/log/index.js";
import { rolePermissions } from "../../src/nats-auth/index.js";
import { FleetHistory } from "../../src/operator/history.js";
import { logWhatIfReader } from "../../src/operator/what-if.js";
import { canonicalJson, fleetProjection } from "../../src/projections/index.js";
import { ProjectionRuntime } from "../../src/projections/runtime/index.js";
import { startServer, tempDir, uniqueStream } from "../harness/nats.js";
import { spawnApi } from "../support/api-process.js";
import { runCli } from "../support/cli.js";
import { rand } from "../support/gateway.js";
import { credsFile, natsAuthInit, openLogAs } from "../support/nats-auth.js";
import { sampleEvents } from "../support/sample-events.js";

const ROLES = ["gateway", "reconciler", "api", "reader", "router", "archiver"] as const;
/** The roles that may publish to no log subject at all. */
const NO_LOG_WRITES: readonly Role[] = ["reader", "router", "archiver"];
type Role = (typeof ROLES)[number];

interface Forged {
  seq: number;
  role: Role;
  subject: string;
  kind: EventKind;
}

describe("subject ↔ kind binding on read (real nats-server, each role's credentials)", () => {
  const stream = uniqueStream("BIND");
  const prefix = `bind${rand()}.evt`;
  const subjects = new Subjects(prefix);
  const dir = tempDir("subject-binding");
  const creds = (role: Role) => credsFile(dir, role);
  let server: Awaited<ReturnType<typeof startServer>> | undefined;
  const logs = new Map<Role, Log>();
  const forged: Forged[] = [];
  let baselineSeq = 0;
  let readerLog: Log;
  const gpu8Subject = subjects.node("gpu-8");

  const url = () => server?.url ?? "";
  const asReader = () => [
    ...["--nats", url(), "--stream", stream, "--subject-prefix", prefix],
    ...["--nats-creds", creds("reader")],
  ];
  const rawPublish = async (js: JetStreamClient, subject: string, event: Event) =>
    (await js.publish(subject, encodeEvent(event))).seq;

  before(async () => {
    await natsAuthInit(dir, stream, prefix);
    server = await startServer({ include: join(dir, "auth.conf") });
    for (const role of ["api", ...ROLES.filter((r) => r !== "api")] as Role[]) {
      logs.set(
        role,
        // The API's credentials create the stream; the others only open it.
        await openLogAs({ url: url(), dir, stream, prefix, role, ensure: role === "api" }),
      );
    }
    readerLog = logs.get("reader")!;

    const samples = sampleEvents();
    assert.deepEqual(
      new Set(samples.map((e) => e.body.case)),
      new Set(EVENT_KINDS),
      "the samples hold one event of every kind",
    );

    // The fleet: every sample published raw by the role that writes its subject, where it belongs.
    for (const e of samples) {
      const kind = e.body.case as EventKind;
      const role = SUBJECT_WRITERS[KIND_SUBJECTS[kind].family];
      baselineSeq = await rawPublish(jetstream(logs.get(role)!.nc), subjectFor(subjects, e), e);
    }

    // The forgeries: each role, every log subject it may publish to, every kind that does not belong there.
    let n = 0;
    for (const role of ROLES) {
      const js = jetstream(logs.get(role)!.nc);
      const patterns = rolePermissions(role, { stream, prefix, buckets: dummyBuckets }).publish.allow.filter(
        (s) => s.startsWith(`${prefix}.`),
      );
      if (NO_LOG_WRITES.includes(role)) {
        assert.deepEqual(patterns, [], `the ${role} may publish to no log subject`);
        await assert.rejects(
          js.publish(subjects.node("gpu-a1"), encodeEvent(samples[0]!)).catch((err) => {
            throw logErrorFrom(err);
          }),
          (err) => isLogError(err, "permission-denied"),
        );
        continue;
      }
      assert.ok(patterns.length > 0, `${role} may publish to some log subject`);
      for (const pattern of patterns) {
        for (const sample of samples) {
          const subject = pattern.replace("*", tokenOf(sample));
          if (subject === subjectFor(subjects, sample)) continue; // it belongs: the baseline has it
          const event = clone(EventSchema, sample);
          event.id = `forged-${role}-${n++}`;
          const seq = await rawPublish(js, subject, event);
          forged.push({ seq, role, subject, kind: sample.body.case as EventKind });
        }
      }
    }
    // The issue's own example: the gateway cordons a node, "by mallory", on the node's subject.
    const cordon = clone(EventSchema, samples.find((e) => e.body.case === "nodeCordoned")!);
    cordon.id = "forged-mallory";
    if (cordon.body.case === "nodeCordoned") {
      cordon.body.value.operator = "mallory";
      cordon.body.value.nodeId = "gpu-8";
    }
    const gpu8 = gpu8Subject;
    forged.push({
      seq: await rawPublish(jetstream(logs.get("gateway")!.nc), gpu8, cordon),
      role: "gateway",
      subject: gpu8,
      kind: "nodeCordoned",
    });
    // A kind on its own family's subject, but for another node: refused as well.
    const hw = clone(EventSchema, samples.find((e) => e.body.case === "hardwareChanged")!);
    hw.id = "forged-other-node";
    const other = subjects.node("gpu-b9");
    forged.push({
      seq: await rawPublish(jetstream(logs.get("gateway")!.nc), other, hw),
      role: "gateway",
      subject: other,
      kind: "hardwareChanged",
    });
    for (const role of ["gateway", "reconciler", "api"] as const) {
      assert.ok(
        forged.some((f) => f.role === role),
        `${role} forged something`,
      );
    }
  });

  after(async () => {
    await Promise.all([...logs.values()].map((l) => l.close()));
    await server?.close();
  });

  it("stores every forgery (the server cannot tell), after the fleet", async () => {
    assert.equal(await readerLog.lastSeq(), forged.at(-1)!.seq);
    assert.ok(forged.every((f) => f.seq > baselineSeq));
  });

  it("replay: the fleet with the forgeries is byte-identical to the fleet without them", async () => {
    const all = await runCli(["replay", ...asReader(), "--json", "--no-snapshots"]);
    assert.equal(all.code, 0, all.stderr);
    const without = await runCli([
      ...["replay", ...asReader(), "--json", "--no-snapshots", "--until-seq", String(baselineSeq)],
    ]);
    assert.equal(without.code, 0, without.stderr);
    assert.equal(all.stdout, without.stdout);
    // Not an empty fleet: the baseline was folded.
    const state = JSON.parse(all.stdout).state;
    assert.ok(state.inventory.nodes["gpu-a1"], "gpu-a1 registered");
    assert.equal(state.inventory.nodes["gpu-8"], undefined, "gpu-8 came only from a forgery");
    assert.doesNotMatch(all.stdout, /mallory/);
    for (const f of forged) {
      assert.match(
        all.stderr,
        new RegExp(`refused ${f.kind} at sequence ${f.seq} on ${regexText(f.subject)}`),
      );
    }
  });

  it("check-log reports each forgery with its seq, subject and kind, and exits 1", async () => {
    const r = await runCli(["check-log", ...asReader(), "--json"], { timeoutMs: 120_000 });
    assert.equal(r.code, 1, r.stderr);
    const report = JSON.parse(r.stdout) as {
      violations: Array<{ rule: string; seq: number; message: string }>;
    };
    const refused = report.violations.filter((v) => v.rule === "subject-kind");
    assert.deepEqual(
      refused.map((v) => v.seq),
      forged.map((f) => f.seq),
    );
    for (const [i, f] of forged.entries()) {
      const v = refused[i]!;
      assert.ok(v.message.includes(f.subject) && v.message.includes(f.kind), v.message);
    }
    assert.ok(
      report.violations.every((v) => v.rule !== "subject-kind" || v.seq > baselineSeq),
      "nothing of the baseline was refused",
    );
    const text = await runCli(["check-log", ...asReader()], { timeoutMs: 120_000 });
    assert.equal(text.code, 1);
    const f = forged.at(-2)!; // the gateway's cordon of gpu-8
    assert.match(
      text.stdout,
      new RegExp(`seq ${f.seq} \\[subject-kind\\] nodeCordoned .*${regexText(f.subject)}`),
    );
  });

  it("llmgw events shows each forgery as refused, with its seq and subject", async () => {
    const r = await runCli(["events", ...asReader(), "--json"]);
    assert.equal(r.code, 0, r.stderr);
    const lines = r.stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { seq: number; subject: string; kind: string; refused?: string });
    assert.deepEqual(
      lines.filter((l) => l.refused !== undefined).map((l) => [l.seq, l.subject, l.kind]),
      forged.map((f) => [f.seq, f.subject, f.kind]),
    );
    assert.equal(lines.filter((l) => l.refused === undefined).length, baselineSeq);
    const text = await runCli(["events", ...asReader(), "--from-seq", String(forged[0]!.seq)]);
    assert.match(text.stdout, new RegExp(`${regexText(forged[0]!.subject)}  REFUSED ${forged[0]!.kind}`));
  });

  it("the runtime, the fleet history and what-if pass them over; the runtime counts them by kind", async () => {
    const replayed = await runCli([
      ...["replay", ...asReader(), "--json", "--no-snapshots", "--until-seq", String(baselineSeq)],
    ]);
    const expected = canonicalJson(JSON.parse(replayed.stdout).state);

    const registry = new Registry();
    const runtime = new ProjectionRuntime(readerLog, fleetProjection, { metrics: registry });
    await runtime.start();
    try {
      // Caught up past the last forgery: a refused event is passed, not waited for.
      assert.equal(runtime.lastSeq, forged.at(-1)!.seq);
      assert.equal(runtime.eventsFolded, baselineSeq);
      assert.equal(runtime.refusedCount, forged.length);
      assert.deepEqual(
        runtime.refusedSeqs,
        forged.map((f) => f.seq).slice(0, 100), // the first 100 are kept
      );
      assert.equal(canonicalJson(runtime.state), expected);
      const metric = await registry.getSingleMetric("llmgw_projection_events_refused_total")!.get();
      const byKind = new Map<string, number>();
      for (const f of forged) byKind.set(f.kind, (byKind.get(f.kind) ?? 0) + 1);
      for (const [kind, count] of byKind) {
        const v = metric.values.find((x) => x.labels["kind"] === kind);
        assert.equal(v?.value, count, `refused ${kind}`);
      }
    } finally {
      await runtime.stop();
    }

    const history = new FleetHistory(readerLog);
    assert.equal(canonicalJson(await history.at(forged.at(-1)!.seq)), expected);

    const seen: string[] = [];
    for await (const r of logWhatIfReader(readerLog).all(forged.at(-1)!.seq)) seen.push(r.event.id);
    assert.equal(seen.length, baselineSeq);
    assert.ok(!seen.some((id) => id.startsWith("forged-")));
  });

  it("the API process folds none of them, shows them refused in its events and counts them", async () => {
    const api = await spawnApi([
      ...["--nats", url(), "--stream", stream, "--subject-prefix", prefix, "--nats-creds", creds("api")],
    ]);
    try {
      const get = async (path: string) => {
        const r = await fetch(`${api.url}${path}`);
        assert.equal(r.status, 200, `${path}: ${await r.clone().text()}\n${api.output()}`);
        return r;
      };
      const fleet = (await (await get("/v1/fleet")).json()) as { seq: number; nodes: Array<{ id: string }> };
      assert.equal(fleet.seq, baselineSeq, "the API's fleet is folded up to the last event that belongs");
      assert.ok(!JSON.stringify(fleet).includes("gpu-8") && !JSON.stringify(fleet).includes("mallory"));
      const page = (await (await get(`/v1/events?after=${baselineSeq}&limit=1000`)).json()) as {
        events: Array<{ seq: number; subject: string; kind: string; refused?: string }>;
      };
      assert.deepEqual(
        page.events.map((e) => [e.seq, e.subject, e.kind, e.refused !== undefined]),
        forged.map((f) => [f.seq, f.subject, f.kind, true]),
      );
      const metrics = await (await get("/metrics")).text();
      const counted = [
        ...metrics.matchAll(/^llmgw_projection_events_refused_total\{[^}]*\} (\d+)$/gm),
      ].reduce((sum, m) => sum + Number(m[1]), 0);
      assert.equal(counted, forged.length);
      assert.match(
        api.output(),
        new RegExp(`refused nodeCordoned at sequence ${forged.at(-2)!.seq} on ${regexText(gpu8Subject)}`),
      );
    } finally {
      api.proc.kill("SIGKILL");
    }
  });
});

/** Buckets are not what this test is about; any names do. */
const dummyBuckets = { leases: "l", gateways: "g", endpoints: "e", snapshots: "s", revoked: "r" };

/** The subject token a forgery uses for `*`: the id its body names, so only the kind can be wrong. */
function tokenOf(e: Event): string {
  const v = e.body.value as { nodeId?: string; gatewayId?: string } | undefined;
  if (v?.nodeId) return nodeIdToken(v.nodeId);
  if (v?.gatewayId) return v.gatewayId;
  return "gpu-a1";
}

function regexText(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}
