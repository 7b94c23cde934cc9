/**
 * NATS credentials per role against a real nats-server running the
 * authorization block `llmgw nats-auth init` writes: the gateway, the
 * reconciler and the API run as processes with their own credentials and
 * work; a forged reconcile pass with the gateway's or the API's credentials
 * is refused and leaves the log as it was; the reader runs events, replay
 * and check-log and can publish nothing, change the stream or write a
 * bucket; the API writes revocations that the gateway can read but not
 * lift; without credentials the server refuses the connection.
 */
import assert from "node:assert/strict";
import { copyFileSync, existsSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { Kvm } from "@nats-io/kv";
import { newEvent } from "../../src/codec/index.js";
import { Writer_Kind } from "../../src/gen/llmgw/v1/events_pb.js";
import { AckedPublisher } from "../../src/log/acked-publish.js";
import { isLogError, type Log, LogError, logErrorFrom, openLog } from "../../src/log/index.js";
import { startServer, tempDir, uniqueStream } from "../harness/nats.js";
import { codeOf, TestAgent } from "../support/agent.js";
import { type ApiProcess, spawnApi } from "../support/api-process.js";
import { makeTestCerts } from "../support/certs.js";
import { runCli } from "../support/cli.js";
import { eventually } from "../support/eventually.js";
import { type GatewayProcess, rand, spawnGateway } from "../support/gateway.js";
import { credsFile, natsAuthInit, openLogAs } from "../support/nats-auth.js";
import { type ReconcilerProcess, spawnReconciler } from "../support/reconciler.js";
import { h100Registration } from "../support/sample-events.js";

type Server = Awaited<ReturnType<typeof startServer>>;
/** The roles of the version before the router's: an older credentials set has these four. */
const ROLES = ["gateway", "reconciler", "api", "reader"] as const;
type Role = (typeof ROLES)[number];

describe("NATS credentials per role (real nats-server with the generated auth config)", () => {
  const stream = uniqueStream("AUTH");
  const prefix = `auth${rand()}.evt`;
  const buckets = {
    lease: `rl_${rand()}`,
    gateways: `gwl_${rand()}`,
    endpoints: `ep_${rand()}`,
    snapshots: `snap_${rand()}`,
    revoked: `rev_${rand()}`,
  };
  const dir = tempDir("nats-auth");
  const creds = (role: Role) => credsFile(dir, role);
  const certs = makeTestCerts();
  let server: Server | undefined;
  let gw: GatewayProcess | undefined;
  let rec: ReconcilerProcess | undefined;
  let api: ApiProcess | undefined;
  let agent: TestAgent | undefined;
  const logs: Log[] = [];

  const url = () => server?.url ?? "";
  const logFlags = () => ["--nats", url(), "--stream", stream, "--subject-prefix", prefix];
  /** The log opened in this process with `role`'s credentials (the stream is not created or changed). */
  const openAs = async (role: Role) => {
    const log = await openLogAs({ url: url(), dir, stream, prefix, role, ensure: false });
    logs.push(log);
    return log;
  };

  before(async () => {
    await natsAuthInit(dir, stream, prefix, [
      "--lease-bucket",
      buckets.lease,
      "--gateways-bucket",
      buckets.gateways,
      "--endpoints-bucket",
      buckets.endpoints,
      "--snapshot-bucket",
      buckets.snapshots,
      "--revoked-bucket",
      buckets.revoked,
    ]);
    server = await startServer({ include: join(dir, "auth.conf") });
    gw = await spawnGateway(
      [
        ...["--id", "gw-auth", ...logFlags(), "--lease-bucket", buckets.gateways],
        ...["--revoked-bucket", buckets.revoked, "--nats-creds", creds("gateway")],
      ],
      certs,
    );
    rec = await spawnReconciler({
      id: "rec-auth",
      nats: url(),
      stream,
      prefix,
      leaseBucket: buckets.lease,
      gatewaysBucket: buckets.gateways,
      args: ["--endpoints-bucket", buckets.endpoints, "--nats-creds", creds("reconciler")],
    });
    api = await spawnApi([
      ...logFlags(),
      "--snapshot-bucket",
      buckets.snapshots,
      "--nats-creds",
      creds("api"),
    ]);
    agent = await TestAgent.connect({
      baseUrl: gw.url,
      tls: { ca: certs.ca, ...certs.client("gpu-auth-1") },
      registration: h100Registration("gpu-auth-1"),
    });
  });

  after(async () => {
    agent?.abort();
    await Promise.all(logs.map((l) => l.close()));
    api?.proc.kill("SIGKILL");
    await rec?.kill();
    gw?.proc.kill("SIGKILL");
    await server?.close();
  });

  it("writes the seeds mode 0600 and refuses to overwrite them without --force", async () => {
    for (const role of ROLES) assert.equal(statSync(creds(role)).mode & 0o777, 0o600, role);
    const again = await runCli(["nats-auth", "init", "--dir", dir]);
    assert.equal(again.code, 2, again.stderr);
    assert.match(again.stderr, /already exist.*--force/);
  });

  it("names each file for what it holds: <role>.nk is an NKEY seed with NATS's markers, no JWT .creds", async () => {
    for (const role of ROLES) {
      const text = readFileSync(creds(role), "utf8");
      assert.match(text, /^# NATS NKEY user seed \(not a JWT \.creds file\)/, role);
      assert.match(
        text,
        /^-----BEGIN USER NKEY SEED-----\nSU[A-Z2-7]{56}\n------END USER NKEY SEED------\n$/m,
        role,
      );
      assert.ok(!text.includes("NATS USER JWT"), role);
      assert.ok(!existsSync(join(dir, `${role}.creds`)), `no ${role}.creds is written`);
    }
  });

  it("renames the <role>.creds seed files of an earlier version to <role>.nk, keeping their keys", async () => {
    const old = tempDir("nats-auth-old");
    copyFileSync(join(dir, "auth.conf"), join(old, "auth.conf"));
    for (const role of ROLES) copyFileSync(creds(role), join(old, `${role}.creds`));
    // A JWT .creds file is a real one: it is not touched.
    const jwtCreds = "-----BEGIN NATS USER JWT-----\neyJ0.eyJ1.c2ln\n------END NATS USER JWT------\n";
    writeFileSync(join(old, "someone.creds"), jwtCreds);
    const r = await runCli(["nats-auth", "init", "--dir", old, "--keep-existing"]);
    assert.equal(r.code, 0, r.stderr);
    for (const role of ROLES) {
      assert.ok(
        r.stdout.includes(`renamed the seed file of an earlier version to ${join(old, `${role}.nk`)}`),
        r.stdout,
      );
      assert.equal(readFileSync(join(old, `${role}.nk`), "utf8"), readFileSync(creds(role), "utf8"), role);
      assert.ok(!existsSync(join(old, `${role}.creds`)), role);
    }
    // That version had no router role: its seed file is added beside the kept ones.
    assert.match(r.stdout, /router\s+\S+router\.nk/);
    assert.ok(existsSync(join(old, "router.nk")), "the router role's seed file is added");
    assert.equal(readFileSync(join(old, "someone.creds"), "utf8"), jwtCreds);
    // The renamed reader file still opens the log (the same user the server knows).
    const events = await runCli(["events", ...logFlags(), "--nats-creds", join(old, "reader.nk"), "--json"]);
    assert.equal(events.code, 0, events.stderr);
  });

  it("runs a gateway, a reconciler and an API process, each with its own credentials", async () => {
    const reader = await openAs("reader");
    await eventually(
      async () => {
        for await (const r of reader.read()) if (r.event.body.case === "reconcilePass") return true;
        return false;
      },
      { what: "a reconcile pass appended by the reconciler process", timeoutMs: 30_000 },
    );
    await eventually(
      async () => {
        const res = await fetch(`${api?.url}/v1/nodes`);
        const body = (await res.json()) as { nodes?: Array<{ nodeId: string }> };
        return res.status === 200 && (body.nodes ?? []).some((n) => n.nodeId === "gpu-auth-1");
      },
      { what: "the API process serving the registered node on /v1/nodes", timeoutMs: 30_000 },
    );
  });

  it("refuses a forged reconcile pass with the gateway's or the API's credentials; the log is unchanged", async () => {
    const reader = await openAs("reader");
    for (const role of ["gateway", "api"] as const) {
      const log = await openAs(role);
      const before = await reader.lastSeq();
      const forged = newEvent({
        id: `forged-${role}-${rand()}`,
        timeUnixMs: BigInt(Date.now()),
        writer: { kind: Writer_Kind.RECONCILER, id: "rec-auth" },
        body: {
          case: "reconcilePass",
          value: { leaderId: "rec-auth", leaseRevision: 1n, observedSeq: BigInt(before), trigger: "forged" },
        },
      });
      await assert.rejects(
        log.append(forged),
        (err) => isLogError(err, "permission-denied") && /reconciler/.test(err.message),
        `a pass published with the ${role}'s credentials`,
      );
      // The refusal came from the server; nothing it could have stored later is in the log.
      await log.nc.flush();
      assert.equal(await reader.lastSeq(), before, `the log after the ${role}'s forged pass`);
    }
  });

  it("lets the reader run events, replay, explain, what-if and check-log as processes (no consumer), and publish nothing", async () => {
    const withReader = [...logFlags(), "--nats-creds", creds("reader")];
    const events = await runCli(["events", ...withReader]);
    assert.equal(events.code, 0, events.stderr);
    assert.match(events.stdout, /reconcilePass|reconcile/i);
    const replay = await runCli(["replay", ...withReader, "--snapshot-bucket", buckets.snapshots]);
    assert.equal(replay.code, 0, replay.stderr);
    assert.match(replay.stdout, /gpu-auth-1/);
    const until = await runCli(["replay", ...withReader, "--until-seq", "2", "--no-snapshots", "--json"]);
    assert.equal(until.code, 0, until.stderr);
    assert.equal((JSON.parse(until.stdout) as { seq: number }).seq, 2);
    const explain = await runCli(["explain", "node", "gpu-auth-1", ...withReader]);
    assert.equal(explain.code, 0, explain.stderr);
    const policy = join(dir, "spread.yaml");
    writeFileSync(policy, "policy: spread\n");
    const whatIf = await runCli(["what-if", "--config", policy, ...withReader]);
    assert.equal(whatIf.code, 0, whatIf.stderr);
    assert.match(whatIf.stdout, /compared/);
    const check = await runCli(["check-log", ...withReader]);
    assert.equal(check.code, 0, `${check.stdout}\n${check.stderr}`);
    // None of them could create a consumer (the reader's credentials grant none): they read with direct gets.
    for (const out of [events, replay, until, explain, whatIf, check]) {
      assert.doesNotMatch(out.stderr, /[Pp]ermissions [Vv]iolation/);
    }

    const reader = await openAs("reader");
    const publisher = new AckedPublisher(reader.nc);
    const before = await reader.lastSeq();
    for (const subject of ["reconciler", "catalog", "session.x", "operator.x", "gateway.gw-auth"]) {
      await assert.rejects(
        publisher.publish(`${prefix}.${subject}`, new Uint8Array([1]), `r-${rand()}`, { stream }, 5_000),
        (err) => isLogError(err, "permission-denied"),
        `the reader publishing to ${subject}`,
      );
    }
    // Nor change the stream or write a bucket: refused by the server, reported as such.
    await assert.rejects(
      reader.jsm.streams.update(stream, { max_msgs: 1 }).catch((err) => {
        throw logErrorFrom(err);
      }),
      (err) => isLogError(err, "permission-denied") && /STREAM\.UPDATE/.test(err.message),
      "the reader updating the stream",
    );
    const gateways = await new Kvm(reader.nc).open(buckets.gateways);
    await assert.rejects(
      gateways.put("gw-auth", "forged").catch((err) => {
        throw logErrorFrom(err);
      }),
      (err) => isLogError(err, "permission-denied"),
      "the reader writing the gateways' lease bucket",
    );
    assert.equal(await reader.lastSeq(), before, "the log after the reader's publishes");
  });

  it("lets the API write revocations and the gateway read them, not write them", async () => {
    const api = await openAs("api");
    const gateway = await openAs("gateway");
    const revoked = await new Kvm(api.nc).create(buckets.revoked, { history: 1 });
    await revoked.put("gpu-revoked-1", "revoked by test");
    const seen = await (await new Kvm(gateway.nc).open(buckets.revoked)).get("gpu-revoked-1");
    assert.equal(seen?.string(), "revoked by test");
    await assert.rejects(
      (await new Kvm(gateway.nc).open(buckets.revoked)).delete("gpu-revoked-1").catch((err) => {
        throw logErrorFrom(err);
      }),
      (err) => isLogError(err, "permission-denied"),
      "the gateway lifting a revocation",
    );
  });

  it("llmgw revoke with the API's credentials cuts off an agent at the gateway running with its own; the reader's are refused", async () => {
    const node = "gpu-auth-revoked";
    const revokedAgent = await TestAgent.connect({
      baseUrl: gw!.url,
      tls: { ca: certs.ca, ...certs.client(node) },
      registration: h100Registration(node),
    });
    try {
      const bucket = ["--nats", url(), "--revoked-bucket", buckets.revoked];
      const asReader = await runCli(["revoke", node, ...bucket, "--nats-creds", creds("reader")]);
      assert.notEqual(asReader.code, 0, "the reader wrote a revocation");
      assert.equal(revokedAgent.done, false, "the agent was cut off by the reader's refused revocation");
      const asApi = await runCli([
        "revoke",
        node,
        "--reason",
        "test",
        ...bucket,
        "--nats-creds",
        creds("api"),
      ]);
      assert.equal(asApi.code, 0, asApi.stderr);
      const ended = await Promise.race([
        revokedAgent.ended,
        new Promise<"hung">((r) => setTimeout(() => r("hung"), 10_000).unref()),
      ]);
      assert.notEqual(
        ended,
        "hung",
        `the revoked agent's stream still open 10 s after llmgw revoke:\n${gw!.output()}`,
      );
      assert.equal(codeOf(ended), "PermissionDenied", String(ended));
      const lifted = await runCli(["unrevoke", node, ...bucket, "--nats-creds", creds("api")]);
      assert.equal(lifted.code, 0, lifted.stderr);
    } finally {
      revokedAgent.abort();
    }
  });

  it("refuses a connection without credentials, and names a bad credentials file", async () => {
    await assert.rejects(
      openLog({ url: url(), clientName: "test anonymous", name: stream, prefix, ensure: false }),
      (err) => err instanceof LogError && err.code === "unauthenticated" && /--nats-creds/.test(err.message),
    );
    const anonymous = await runCli(["events", ...logFlags()]);
    assert.notEqual(anonymous.code, 0);
    assert.match(anonymous.stderr, /refused the connection.*--nats-creds/);

    const garbage = join(dir, "garbage.creds");
    writeFileSync(garbage, "not a credentials file\n");
    for (const file of [garbage, join(dir, "missing.creds")]) {
      const r = await runCli(["events", ...logFlags(), "--nats-creds", file]);
      assert.equal(r.code, 2, r.stderr);
      assert.ok(r.stderr.includes(`--nats-creds ${file}`), r.stderr);
    }
  });
});
