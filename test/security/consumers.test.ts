/**
 * No writes through the server, against a real nats-server running the
 * authorization `llmgw nats-auth init` writes (default layout, each role's
 * own credentials):
 * - the reader and the router can create no consumer of any kind (push,
 *   pull, durable, ordered) on the log or on any bucket: NATS cannot tell
 *   a push consumer's create from a pull consumer's by subject (nats-server
 *   issue #8274), so they have no consumer API at all and read with direct
 *   gets; the API gets none on a bucket; all read buckets by key;
 * - a push consumer a role that writes creates on a stream it may read delivers
 *   nothing into another role's subjects or buckets, and no role can make
 *   interest anywhere but its inboxes;
 * - no role creates consumers past a stream's or a bucket's limit;
 * - a `Nats-Rollup` publish no longer wipes a bucket or the log, and a
 *   purge is refused;
 * - an existing stream or bucket made weaker (by an earlier version) is
 *   brought to the guards where the role may, and reported otherwise.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import {
  AckPolicy,
  DeliverPolicy,
  JetStreamApiError,
  type JetStreamManager,
  jetstream,
  jetstreamManager,
} from "@nats-io/jetstream";
import { type KV, Kvm } from "@nats-io/kv";
import { connect, headers, type NatsConnection } from "@nats-io/transport-node";
import { bucketKeys, isLogError, type Log, logErrorFrom, openBucket, openLog } from "../../src/log/index.js";
import { authenticatorFromCredentials, DEFAULT_BUCKETS, DEFAULT_LAYOUT } from "../../src/nats-auth/index.js";
import { startServer, tempDir } from "../harness/nats.js";
import { runCli } from "../support/cli.js";

const ROLES = ["gateway", "reconciler", "api", "reader", "router"] as const;
type Role = (typeof ROLES)[number];
/** The roles that write: consumers on what they may read, within limits. */
const WRITERS = ["gateway", "reconciler", "api"] as const;
/** The roles that only read: no consumer at all (NATS cannot tell push from pull by subject). */
const READ_ONLY = ["reader", "router"] as const;
const { stream, prefix } = DEFAULT_LAYOUT;
const B = DEFAULT_BUCKETS;
const allBuckets = Object.values(B);

/** One server with the generated authorization; connections per role, closed at the end. */
function authServer(tag: string) {
  const dir = tempDir(tag);
  const state: {
    server?: Awaited<ReturnType<typeof startServer>>;
    conns: NatsConnection[];
    logs: Log[];
  } = { conns: [], logs: [] };
  const auth = (role: Role) => authenticatorFromCredentials(readFileSync(join(dir, `${role}.nk`), "utf8"));
  return {
    async start() {
      const init = await runCli(["nats-auth", "init", "--dir", dir]);
      assert.equal(init.code, 0, init.stderr);
      state.server = await startServer({ include: join(dir, "auth.conf") });
    },
    async stop() {
      await Promise.all(state.logs.map((l) => l.close()));
      await Promise.all(state.conns.map((c) => c.close().catch(() => {})));
      await state.server?.close();
    },
    async as(role: Role): Promise<NatsConnection> {
      const nc = await connect({ servers: state.server?.url ?? "", authenticator: auth(role) });
      state.conns.push(nc);
      return nc;
    },
    async log(role: Role, extra: Partial<Parameters<typeof openLog>[0]> = {}): Promise<Log> {
      const log = await openLog({
        url: state.server?.url ?? "",
        clientName: `test ${role}`,
        security: { authenticator: auth(role) },
        ensure: false,
        ...extra,
      });
      state.logs.push(log);
      return log;
    },
  };
}

const pushConfig = (deliver: string) => ({
  deliver_subject: deliver,
  ack_policy: AckPolicy.None,
  deliver_policy: DeliverPolicy.All,
});

async function refusedAsDenied(p: Promise<unknown>, what: string): Promise<void> {
  await assert.rejects(
    p.catch((err) => {
      throw logErrorFrom(err);
    }),
    (err) => isLogError(err, "permission-denied"),
    what,
  );
}

async function messages(jsm: JetStreamManager, name: string): Promise<number> {
  return (await jsm.streams.info(name)).state.messages;
}

describe("no writes through the server (real nats-server, each role's credentials)", () => {
  const s = authServer("consumers");
  const kvs = new Map<string, KV>();
  let admin: JetStreamManager; // the API's: may read every stream's info

  before(async () => {
    await s.start();
    // The processes' own ways: the API creates the log; each bucket's writer creates its bucket.
    const api = await s.log("api", { ensure: true });
    admin = api.jsm;
    await api.js.publish(`${prefix}.catalog`, new Uint8Array([1]));
    const writerOf: Record<string, Role> = {
      [B.leases]: "reconciler",
      [B.endpoints]: "reconciler",
      [B.snapshots]: "reconciler",
      [B.gateways]: "gateway",
      [B.revoked]: "api",
    };
    for (const bucket of allBuckets) {
      const nc = await s.as(writerOf[bucket] as Role);
      const kv = await openBucket(jetstream(nc), bucket, { history: 1 });
      await kv.put("a", "1");
      await kv.put("b", "2");
      kvs.set(bucket, kv);
    }
  });
  after(() => s.stop());

  it("the reader and the router can create no consumer of any kind on the log or on any bucket", async () => {
    for (const role of READ_ONLY) {
      const nc = await s.as(role);
      const jsm = await jetstreamManager(nc);
      const js = jetstream(nc);
      for (const source of [stream, ...allBuckets.map((b) => `KV_${b}`)]) {
        const what = (kind: string) => `${role}: a ${kind} consumer on ${source}`;
        await refusedAsDenied(jsm.consumers.add(source, pushConfig(`_INBOX.${role}push`)), what("push"));
        await refusedAsDenied(
          jsm.consumers.add(source, { ack_policy: AckPolicy.None, name: `pull_${role}` }),
          what("pull"),
        );
        await refusedAsDenied(
          jsm.consumers.add(source, { ack_policy: AckPolicy.Explicit, durable_name: `durable_${role}` }),
          what("durable"),
        );
        // The older API's durable create, by its own subject.
        await refusedAsDenied(
          nc.request(
            `$JS.API.CONSUMER.DURABLE.CREATE.${source}.old_${role}`,
            JSON.stringify({
              stream_name: source,
              config: { durable_name: `old_${role}`, ack_policy: "none" },
            }),
          ),
          what("legacy durable"),
        );
        // An ordered consumer (created when it is got, or at the latest when first read).
        await refusedAsDenied(
          js.consumers.get(source).then((c) => c.next({ expires: 1000 })),
          what("ordered"),
        );
      }
      // The server holds none of theirs.
      for (const source of [stream, ...allBuckets.map((b) => `KV_${b}`)]) {
        assert.equal((await admin.streams.info(source)).state.consumer_count, 0, `${source} after ${role}`);
      }
    }
  });

  it("the reader, the router and the API read the buckets they may by key, with no consumer", async () => {
    const readable: Record<string, string[]> = {
      reader: allBuckets,
      api: allBuckets,
      router: [B.endpoints],
    };
    for (const role of ["reader", "api", "router"] as const) {
      const jsm = await jetstreamManager(await s.as(role));
      if (role === "api") {
        for (const bucket of allBuckets) {
          await refusedAsDenied(
            jsm.consumers.add(`KV_${bucket}`, pushConfig(`_INBOX.${role}${bucket}`)),
            `${role}: a push consumer on ${bucket}`,
          );
          await refusedAsDenied(
            jsm.consumers.add(`KV_${bucket}`, { ack_policy: AckPolicy.None, name: `pull_${role}` }),
            `${role}: a pull consumer on ${bucket}`,
          );
        }
      }
      for (const bucket of readable[role] ?? []) {
        const nc = await s.as(role);
        const kv = await new Kvm(nc).open(bucket);
        assert.deepEqual(
          await bucketKeys(kv, await jetstreamManager(nc), bucket),
          ["a", "b"],
          `${role} ${bucket}`,
        );
        assert.equal((await kv.get("b"))?.string(), "2");
      }
    }
  });

  it("a push consumer any role creates delivers nothing into another role's subjects or buckets", async () => {
    const before = new Map<string, number>();
    for (const name of [stream, ...allBuckets.map((b) => `KV_${b}`)])
      before.set(name, await messages(admin, name));
    const targets = [
      `${prefix}.catalog`,
      `${prefix}.operator.gpu-1`,
      `${prefix}.reconciler`,
      `${prefix}.node.gpu-1`,
      `${prefix}.session.gpu-1`,
      ...allBuckets.map((b) => `$KV.${b}.forged`),
    ];
    const made: Array<{ role: Role; jsm: JetStreamManager; stream: string; name: string }> = [];
    for (const role of ROLES) {
      const jsm = await jetstreamManager(await s.as(role));
      // The streams the role may create consumers on: the log, and the buckets it watches
      // (the reader and the router none: see above).
      const sources = [
        ...(WRITERS.some((w) => w === role) ? [stream] : []),
        ...(role === "gateway" ? [`KV_${B.gateways}`, `KV_${B.revoked}`] : []),
        ...(role === "reconciler" ? [`KV_${B.leases}`, `KV_${B.endpoints}`, `KV_${B.gateways}`] : []),
      ];
      for (const source of sources) {
        for (const target of targets) {
          try {
            const ci = await jsm.consumers.add(source, pushConfig(target));
            made.push({ role, jsm, stream: source, name: ci.name });
          } catch (err) {
            // Refused outright is as good (a delivery into its own stream is a cycle the server refuses).
            assert.ok(err instanceof JetStreamApiError, `${role} ${source} → ${target}: ${String(err)}`);
          }
        }
      }
      // Nor can a role make interest on those subjects itself: it subscribes to inboxes only.
      const nc = await s.as(role);
      const sub = nc.subscribe(`${prefix}.catalog`);
      // The client ends a refused subscription with the server's error.
      const ended = await sub.closed.then(
        (v) => v,
        (err: unknown) => err,
      );
      assert.match(String(ended), /Permissions Violation for Subscription/, `${role} subscribing`);
    }
    assert.ok(made.length > 0, "push consumers were created (NATS cannot refuse them by subject)");
    // Time for deliveries to happen, were there any: each consumer has messages pending and delivered none.
    await new Promise((r) => setTimeout(r, 1500));
    for (const m of made) {
      const ci = await m.jsm.consumers.info(m.stream, m.name);
      assert.ok(ci.num_pending > 0, `${m.role}'s consumer on ${m.stream} has something to deliver`);
      assert.equal(ci.delivered.stream_seq, 0, `${m.role}'s consumer on ${m.stream} delivered`);
    }
    for (const [name, count] of before) assert.equal(await messages(admin, name), count, `${name} after`);
    for (const m of made) await m.jsm.consumers.delete(m.stream, m.name);
  });

  it("a Nats-Rollup publish no longer wipes a bucket or the log, and a purge is refused", async () => {
    const writers: Array<[Role, string]> = [
      ["reconciler", B.leases],
      ["reconciler", B.endpoints],
      ["reconciler", B.snapshots],
      ["gateway", B.gateways],
      ["api", B.revoked],
    ];
    for (const [role, bucket] of writers) {
      const js = jetstream(await s.as(role));
      for (const rollup of ["all", "sub"]) {
        const h = headers();
        h.set("Nats-Rollup", rollup);
        await assert.rejects(
          js.publish(`$KV.${bucket}.a`, "wipe", { headers: h }),
          /rollup/i,
          `${role} rolling up ${bucket} (${rollup})`,
        );
      }
      const kv = await new Kvm(js).open(bucket);
      await assert.rejects(kv.purge("a"), /rollup/i, `${role} purging a key of ${bucket}`);
      assert.deepEqual(await bucketKeys(kv, await js.jetstreamManager(), bucket), ["a", "b"], bucket);
    }
    const gw = jetstream(await s.as("gateway"));
    const h = headers();
    h.set("Nats-Rollup", "all");
    const before = await messages(admin, stream);
    await assert.rejects(gw.publish(`${prefix}.node.gpu-1`, "wipe", { headers: h }), /rollup/i);
    assert.equal(await messages(admin, stream), before);
  });
});

describe("consumer limits and the guards of existing streams (real nats-server)", () => {
  const s = authServer("consumer-limits");
  before(() => s.start());
  after(() => s.stop());

  it("no role creates consumers on the log or on a bucket past the limit", async () => {
    const limit = 3;
    const api = await s.log("api", { ensure: true, maxConsumers: limit });
    assert.equal((await api.jsm.streams.info(stream)).config.max_consumers, limit);
    for (const role of WRITERS) {
      const jsm = await jetstreamManager(await s.as(role));
      const names: string[] = [];
      for (let i = 0; i < limit; i++) {
        names.push(
          (await jsm.consumers.add(stream, { ack_policy: AckPolicy.None, name: `${role}_${i}` })).name,
        );
      }
      await assert.rejects(
        jsm.consumers.add(stream, { ack_policy: AckPolicy.None, name: `${role}_over` }),
        (err) => err instanceof JetStreamApiError && /maximum consumers/i.test(err.message),
        `${role}: a consumer past the log's limit`,
      );
      for (const n of names) await jsm.consumers.delete(stream, n);
    }
    // A bucket: the gateway watches its own; past the limit it is refused too.
    const gw = await s.as("gateway");
    await openBucket(jetstream(gw), B.gateways, { history: 1, maxConsumers: 2 });
    const gjsm = await jetstreamManager(gw);
    const watches = [
      await gjsm.consumers.add(`KV_${B.gateways}`, { ack_policy: AckPolicy.None, name: "w1" }),
    ];
    watches.push(await gjsm.consumers.add(`KV_${B.gateways}`, { ack_policy: AckPolicy.None, name: "w2" }));
    await assert.rejects(
      gjsm.consumers.add(`KV_${B.gateways}`, { ack_policy: AckPolicy.None, name: "w3" }),
      /maximum consumers/i,
    );
  });
});

describe("the guards of existing streams (real nats-server)", () => {
  const s = authServer("old-streams");
  before(() => s.start());
  after(() => s.stop());

  it("an existing log and bucket made the old way are fixed where the role may, and reported", async () => {
    const api = await s.as("api");
    const jsm = await jetstreamManager(api);
    // What an earlier version (or a hand) made: rollups, purges and deletes allowed, no consumer limit.
    await jsm.streams.add({ name: stream, subjects: [`${prefix}.>`], allow_rollup_hdrs: true });
    const kv = await new Kvm(api).create(B.revoked, { history: 5 });
    await kv.put("gpu-1", "x");

    const warned: string[] = [];
    const opened = await openBucket(jetstream(api), B.revoked, { history: 5, warn: (m) => warned.push(m) });
    assert.equal((await opened.get("gpu-1"))?.string(), "x", "the bucket is used as it is");
    assert.equal(warned.length, 1);
    assert.match(warned[0]!, /bucket llmgw_revoked .*Nats-Rollup.*purged.*deleted.*any number of consumers/);

    // A gateway may not change the log: it reports every weak guard.
    const logWarnings: string[] = [];
    await s.log("gateway", { ensure: true, updateStream: false, warn: (m) => logWarnings.push(m) });
    assert.equal(logWarnings.length, 1);
    assert.match(logWarnings[0]!, /stream LLMGW .*Nats-Rollup.*deleted.*any number of consumers.*llmgw api/);
    // The API may: the guards are set; the consumer limit (which the server cannot change) is reported.
    await s.log("api", { ensure: true, warn: (m) => logWarnings.push(m) });
    const fixed = (await jsm.streams.info(stream)).config;
    assert.equal(fixed.allow_rollup_hdrs, false);
    // Purges stay possible on the log: the archiver's role alone may (retention of archived segments).
    assert.equal(fixed.deny_purge, false);
    assert.equal(fixed.deny_delete, true);
    assert.equal(fixed.allow_direct, true, "the reader and the router read it with direct gets");
    assert.equal(logWarnings.length, 2);
    assert.match(logWarnings[0]!, /no direct gets/);
    assert.doesNotMatch(logWarnings[1]!, /Rollup|purged|deleted|direct/);
    assert.match(logWarnings[1]!, /any number of consumers \(at most 1024 wanted\)/);
  });
});
