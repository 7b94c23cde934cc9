/**
 * The router's NATS role against a real nats-server running the
 * authorization block `llmgw nats-auth init` writes: a `llmgw router`
 * process with the router's credentials follows the routing table the
 * reconciler's credentials write, and forwards to the endpoint it names,
 * holding no consumer on the table or the log (it reads with direct gets);
 * with the same credentials nothing can be written (the table, the log), no
 * stream created and none removed. A credentials set from before the role
 * gets it with --keep-existing, the other roles' keys kept.
 */
import assert from "node:assert/strict";
import { existsSync, readFileSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { type JetStreamManager, jetstream, jetstreamManager } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import { newEvent } from "../../src/codec/index.js";
import { Writer_Kind } from "../../src/gen/llmgw/v1/events_pb.js";
import { connectNats, isLogError, openLog } from "../../src/log/index.js";
import { authenticatorFromCredentials } from "../../src/nats-auth/index.js";
import { EndpointsBucket } from "../../src/reconciler/runner/index.js";
import { startServer, tempDir, uniqueStream } from "../harness/nats.js";
import { runCli } from "../support/cli.js";
import { rand } from "../support/gateway.js";
import { type RouterProc, startRouter } from "../support/router-process.js";

describe("the router's NATS role (real nats-server with the generated auth config)", () => {
  const stream = uniqueStream("RAUTH");
  const prefix = `rauth${rand()}.evt`;
  const bucket = `ep_${rand()}`;
  const dir = tempDir("router-auth");
  const creds = (role: string) => join(dir, `${role}.nk`);
  const security = (role: string) => ({
    authenticator: authenticatorFromCredentials(readFileSync(creds(role), "utf8")),
  });
  let server: Awaited<ReturnType<typeof startServer>> | undefined;
  let router: RouterProc | undefined;
  let engine: Server | undefined;
  let engineUrl = "";
  let apiJsm: JetStreamManager | undefined;
  const cleanup: Array<() => Promise<unknown> | unknown> = [];

  before(async () => {
    const init = await runCli([
      ...["nats-auth", "init", "--dir", dir, "--stream", stream, "--subject-prefix", prefix],
      ...["--endpoints-bucket", bucket],
    ]);
    assert.equal(init.code, 0, init.stderr);
    assert.match(init.stdout, /router\s+\S+router\.nk/);
    // A set written before the router role existed: --keep-existing adds the role, keeps the others' keys.
    const gatewaySeed = readFileSync(creds("gateway"), "utf8");
    rmSync(creds("router"));
    const again = await runCli([
      "nats-auth",
      "init",
      "--dir",
      dir,
      "--keep-existing",
      "--stream",
      stream,
      "--subject-prefix",
      prefix,
      "--endpoints-bucket",
      bucket,
    ]);
    assert.equal(again.code, 0, again.stderr);
    assert.equal(readFileSync(creds("gateway"), "utf8"), gatewaySeed, "the gateway's key is kept");
    assert.ok(existsSync(creds("router")), "the router's credentials were added");
    server = await startServer({ include: join(dir, "auth.conf") });
    // The log, created as the API creates it; the table, written as the reconciler writes it.
    const apiLog = await openLog({
      url: server.url,
      clientName: "test api",
      name: stream,
      prefix,
      security: security("api"),
    });
    cleanup.push(() => apiLog.close());
    apiJsm = apiLog.jsm;
    engine = createServer((req, res) => {
      req.resume();
      req.on("end", () => res.writeHead(200, { "content-type": "application/json" }).end('{"ok":true}'));
    });
    await new Promise<void>((r) => engine!.listen(0, "127.0.0.1", r));
    const addr = engine.address();
    engineUrl = `http://127.0.0.1:${typeof addr === "object" && addr ? addr.port : 0}`;
  });

  after(async () => {
    await router?.close();
    for (const c of cleanup.reverse()) await c();
    engine?.close();
    await server?.close();
  });

  it("follows the table written with the reconciler's credentials and routes by it", async () => {
    const nc = await connectNats({
      url: server!.url,
      name: "test reconciler",
      security: security("reconciler"),
    });
    cleanup.push(() => nc.close());
    const table = await EndpointsBucket.open(jetstream(nc), { bucket });
    await table.sync({ chat: [{ replicaId: "chat-1-1", url: engineUrl, nodeId: "n1" }] });
    router = await startRouter(
      ["--nats", server!.url, "--stream", stream, "--subject-prefix", prefix, "--endpoints-bucket", bucket],
      { LLMGW_NATS_CREDS: creds("router") },
    );
    const r = router;
    const deadline = Date.now() + 15_000;
    while ((await r.healthz()).body.status !== "ok") {
      assert.ok(Date.now() < deadline, `the router never loaded the table:\n${r.output()}`);
      await new Promise((res) => setTimeout(res, 100));
    }
    const res = await fetch(`${r.url}/v1/completions`, {
      method: "POST",
      body: '{"model":"chat","prompt":"x"}',
    });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get("x-llmgw-replica"), "chat-1-1");
    await table.sync({ chat: [{ replicaId: "chat-1-2", url: engineUrl, nodeId: "n2" }] });
    while ((await r.healthz()).body.table.endpoints.chat?.[0] !== "chat-1-2") {
      assert.ok(Date.now() < deadline, `the change was not applied:\n${r.output()}`);
      await new Promise((res) => setTimeout(res, 50));
    }
    assert.doesNotMatch(r.output(), /[Pp]ermissions [Vv]iolation|permission/);
    // It follows the table and the log's load reports holding no consumer (it may create none).
    assert.doesNotMatch(r.output(), /load feed stopped|cannot read the routing table/);
    const jsm = await jetstreamManager(nc);
    assert.equal((await jsm.streams.info(`KV_${bucket}`)).state.consumer_count, 0, "consumers on the table");
    assert.equal((await apiJsm!.streams.info(stream)).state.consumer_count, 0, "consumers on the log");
  });

  it("can write nothing, create no stream and delete none with the router's credentials", async () => {
    const nc = await connectNats({ url: server!.url, name: "test router", security: security("router") });
    cleanup.push(() => nc.close());
    const kv = await new Kvm(jetstream(nc)).open(bucket);
    await assert.rejects(kv.put("chat", "[]"), "a table write");
    const log = await openLog({
      url: server!.url,
      clientName: "test router log",
      name: stream,
      prefix,
      ensure: false,
      security: security("router"),
    });
    cleanup.push(() => log.close());
    const forged = newEvent({
      id: `forged-${rand()}`,
      timeUnixMs: BigInt(Date.now()),
      writer: { kind: Writer_Kind.RECONCILER, id: "rec" },
      body: {
        case: "reconcilePass",
        value: { leaderId: "rec", leaseRevision: 1n, observedSeq: 0n, trigger: "forged" },
      },
    });
    await assert.rejects(log.append(forged), (err) => isLogError(err, "permission-denied"));
    const jsm = await jetstreamManager(nc);
    await assert.rejects(
      jsm.streams.add({ name: `X${rand()}`, subjects: [`x${rand()}.>`] }),
      "creating a stream",
    );
    await assert.rejects(jsm.streams.delete(stream), "deleting the log");
  });
});
