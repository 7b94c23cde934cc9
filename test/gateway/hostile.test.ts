/**
 * Hostile and broken agents through real streams (Connect, gRPC and gRPC-Web
 * over HTTP/2 with client certificates) to a real gateway on a real
 * nats-server. Each case ends with a well-behaved agent still served, and the
 * log is checked at the end: only subjects of the layout, and events only for
 * nodes the rules let in.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { Gateway } from "../../src/gateway/index.js";
import { ShardStatus_State } from "../../src/gen/llmgw/v1/agent_pb.js";
import { SessionClosed_Reason } from "../../src/gen/llmgw/v1/events_pb.js";
import { type Log, type LogRecord, openLog } from "../../src/log/index.js";
import { foldFleet } from "../../src/projections/index.js";
import { type NatsServer, startServer, uniqueStream } from "../harness/nats.js";
import { codeOf, type Protocol, TestAgent, type TestAgentOptions } from "../support/agent.js";
import { makeTestCerts, type TestCerts } from "../support/certs.js";
import { rand, readAll, startTestGateway, waitForLog } from "../support/gateway.js";
import {
  BAD_ENDPOINTS,
  DUPLICATES,
  MANY_FIELDS,
  ODD_NODE_IDS,
  RESERVED_IDS,
  type RegistrationCase,
} from "../support/hostile-cases.js";
import { assertLogHygiene, nodeOf } from "../support/log-hygiene.js";
import { encode, frame, RawAgent } from "../support/raw-agent.js";
import { h100Registration } from "../support/sample-events.js";

const PROTOCOLS: Protocol[] = ["connect", "grpc", "grpc-web"];

describe("gateway: hostile and broken agents", () => {
  let server: NatsServer & { close(): Promise<void> };
  let certs: TestCerts;
  let gw: Gateway;
  let dev: Gateway;
  let log: Log;
  let stream: string;
  let prefix: string;
  /** Nodes the rules let into the log: well-behaved ones and those that registered before misbehaving. */
  const allowed = new Set<string>();

  before(async () => {
    server = await startServer();
    certs = makeTestCerts();
    stream = uniqueStream("GWHOSTILE");
    prefix = `t${rand()}.evt`;
    log = await openLog({ url: server.url, clientName: "test", name: stream, prefix });
    const common = {
      nats: server.url,
      stream,
      prefix,
      registrationTimeoutMs: 2_000,
      readMaxBytes: 64 * 1024,
    };
    gw = await startTestGateway({ ...common, certs });
    // Insecure-dev takes the node id from the message: the id rule must hold without a certificate.
    dev = await startTestGateway(common);
  });
  after(async () => {
    try {
      // Whatever tests ran (all, or a few by name), the log they left holds
      // only subjects of the layout and events of admitted nodes.
      if (gw && dev) await assertHygienicLog();
    } finally {
      await gw?.drain("test over");
      await dev?.drain("test over");
      await log?.jsm.streams.delete(stream).catch(() => {});
      await log?.close();
      await server?.close();
    }
  });

  const tls = (cn: string) => ({ ca: certs.ca, ...certs.client(cn) });

  /** Runs a stream that must fail, returning its error. */
  async function refused(opts: Omit<TestAgentOptions, "baseUrl">, baseUrl = gw.url) {
    const a = TestAgent.open({ baseUrl, ...opts });
    try {
      return await a.ended;
    } finally {
      a.abort();
    }
  }

  /** A well-behaved agent still registers, reports and is acked. */
  async function served(protocol: Protocol = "connect", on: "tls" | "dev" = "tls") {
    // One node per protocol and gateway: certificates are made once, sessions follow each other.
    const node = `gpu-good-${protocol}-${on}`;
    allowed.add(node);
    const a = await TestAgent.connect({
      baseUrl: on === "tls" ? gw.url : dev.url,
      protocol,
      ...(on === "tls" ? { tls: tls(node) } : {}),
      registration: h100Registration(node),
    });
    try {
      await a.waitForAck(a.shardStatus({ shardId: "s", state: ShardStatus_State.RUNNING }));
      assert.equal(codeOf(await a.close()), "OK");
    } finally {
      a.abort();
    }
  }

  /** Registers `node` (allowed into the log) and returns the connected agent. */
  async function registered(node: string, protocol: Protocol = "connect") {
    allowed.add(node);
    return await TestAgent.connect({
      baseUrl: gw.url,
      protocol,
      tls: tls(node),
      registration: h100Registration(node),
    });
  }

  /**
   * Registers `node`, lets `send` misbehave and expects the stream to end with
   * `code` (and `message`); the log then holds the session's opening and its
   * PROTOCOL_ERROR close, nothing between.
   */
  async function endsWithProtocolError(
    node: string,
    protocol: Protocol | undefined,
    send: (a: TestAgent) => void,
    expected: { code: string; message?: RegExp },
  ): Promise<void> {
    const a = await registered(node, protocol);
    try {
      send(a);
      const err = await a.ended;
      assert.equal(codeOf(err), expected.code);
      if (expected.message) assert.match(String(err), expected.message);
    } finally {
      a.abort();
    }
    const evs = await closedWith(node, SessionClosed_Reason.PROTOCOL_ERROR);
    assert.deepEqual(
      evs.map((b) => b.case),
      ["sessionOpened", "sessionClosed"],
    );
  }

  /** One test per case: a registration refused with InvalidArgument and the case's message; a good agent is served after. */
  function refusesRegistrations(
    cases: readonly RegistrationCase[],
    nodePrefix: string,
    title: (what: string) => string,
  ): void {
    for (const [i, [what, reg, message]] of cases.entries()) {
      it(title(what), async () => {
        const protocol = PROTOCOLS[i % PROTOCOLS.length]!;
        const node = `${nodePrefix}-${i}`;
        const err = await refused({ protocol, tls: tls(node), registration: reg(node) });
        assert.equal(codeOf(err), "InvalidArgument");
        assert.match(String(err), message);
        await served(protocol);
      });
    }
  }

  const eventsOf = (records: LogRecord[], node: string) =>
    records.filter((r) => nodeOf(r) === node).map((r) => r.event.body);

  /** Waits for the node's session-closed event and returns the node's events. */
  async function closedWith(node: string, reason: SessionClosed_Reason) {
    const records = await waitForLog(
      log,
      (rs) => rs.some((r) => r.event.body.case === "sessionClosed" && nodeOf(r) === node),
      `the session-closed event of ${node}`,
    );
    const evs = eventsOf(records, node);
    const closed = evs.at(-1);
    assert.ok(closed?.case === "sessionClosed", `${node}: last event is ${closed?.case}`);
    assert.equal(SessionClosed_Reason[closed.value.reason], SessionClosed_Reason[reason]);
    return evs;
  }

  describe("wrong message order", () => {
    for (const protocol of PROTOCOLS) {
      it(`refuses anything but a Register first (${protocol})`, async () => {
        const firsts = [
          ["heartbeat", { msg: { case: "heartbeat", value: {} } }],
          ["shard", { msg: { case: "shard", value: { shardId: "s1", state: ShardStatus_State.RUNNING } } }],
          ["result", { msg: { case: "result", value: { commandId: "c1", ok: true } } }],
          ["an empty message", {}],
        ] as const;
        for (const [what, first] of firsts) {
          const node = `gpu-order-${protocol}`;
          const err = await refused({
            protocol,
            tls: tls(node),
            registration: h100Registration(node),
            firstMessage: first,
          });
          assert.equal(codeOf(err), "InvalidArgument", what);
          assert.match(String(err), new RegExp(`first message must be a Register, got ${what}`));
        }
        await served(protocol);
      });
    }
  });

  describe("huge messages", () => {
    for (const protocol of PROTOCOLS) {
      it(`refuses a registration over the read limit with ResourceExhausted (${protocol})`, async () => {
        const node = `gpu-huge-${protocol}`;
        const reg = { ...h100Registration(node), labels: { blob: "x".repeat(100 * 1024) } };
        const err = await refused({ protocol, tls: tls(node), registration: reg });
        assert.equal(codeOf(err), "ResourceExhausted");
        await served(protocol);
      });
    }

    it("refuses a registration the log could not store with ResourceExhausted, not a retryable Unavailable", async () => {
      // The default read limit (1 MiB) equals NATS's default max_payload: a registration just
      // under it would make an event over it. The gateway lowers its read limit to fit.
      const big = await startTestGateway({
        nats: server.url,
        stream,
        prefix,
        certs,
        readMaxBytes: 1024 * 1024,
      });
      try {
        const node = "gpu-huge-log";
        const empty = { ...h100Registration(node), labels: { blob: "" } };
        const size = encode({ msg: { case: "register", value: empty } }).length;
        const reg = { ...empty, labels: { blob: "x".repeat(1024 * 1024 - size - 16) } };
        const err = await refused({ protocol: "grpc", tls: tls(node), registration: reg }, big.url);
        assert.equal(codeOf(err), "ResourceExhausted", String(err));
        const ok = "gpu-huge-log-ok";
        allowed.add(ok);
        const a = await TestAgent.connect({
          baseUrl: big.url,
          tls: tls(ok),
          registration: h100Registration(ok),
        });
        assert.equal(codeOf(await a.close()), "OK");
      } finally {
        await big.drain("test over");
      }
    });

    it("ends a session whose later message is over the read limit (PROTOCOL_ERROR, nothing recorded)", async () => {
      await endsWithProtocolError(
        "gpu-huge-later",
        "grpc",
        (a) =>
          a.shardStatus({
            shardId: "s1",
            state: ShardStatus_State.FAILED,
            lastOutput: "y".repeat(100 * 1024),
          }),
        { code: "ResourceExhausted" },
      );
      await served("grpc");
    });
  });

  describe("deeply nested and oversized repeated fields", () => {
    it("refuses a registration nested deeper than the decoder allows (InvalidArgument)", async () => {
      const node = "gpu-nested";
      const raw = new RawAgent(gw.url, tls(node));
      try {
        // Register{node_id, field 99: 10,000 nested groups}: fits the read limit, not the recursion limit.
        const depth = 10_000;
        const head = Buffer.from(encode({ msg: { case: "register", value: { nodeId: node } } })).subarray(2);
        const inner = Buffer.concat([
          head,
          Buffer.from(Array.from({ length: depth }, () => [0x9b, 0x06]).flat()), // field 99, start group
          Buffer.from(Array.from({ length: depth }, () => [0x9c, 0x06]).flat()), // field 99, end group
        ]);
        const msg = Buffer.concat([Buffer.from([0x0a]), varint(inner.length), inner]);
        for (const protocol of PROTOCOLS) {
          const r = await raw.call(protocol, frame(msg));
          assert.equal(r.code, "InvalidArgument", `${protocol}: ${r.message}`);
          assert.match(r.message, /undecodable message/);
        }
      } finally {
        raw.close();
      }
      await served();
    });

    refusesRegistrations(
      MANY_FIELDS,
      "gpu-many",
      (what) => `refuses a registration with ${what} (InvalidArgument naming the field)`,
    );

    it("ends a session whose heartbeat lists 500 problems (PROTOCOL_ERROR, nothing recorded)", async () => {
      await endsWithProtocolError(
        "gpu-many-problems",
        undefined,
        (a) => a.heartbeat({ newProblems: Array.from({ length: 500 }, (_, i) => `Xid ${i}`) }),
        { code: "InvalidArgument", message: /invalid heartbeat: heartbeat\.new_problems lists 500 problems/ },
      );
      await served();
    });
  });

  describe("duplicates and GPUs the node does not have", () => {
    refusesRegistrations(DUPLICATES, "gpu-dup", (what) => `refuses a registration with ${what}`);

    it("records a shard and a fabric on GPUs the node does not list, as sent (a GPU fell off the bus)", async () => {
      const node = "gpu-lost-gpu";
      allowed.add(node);
      const reg = h100Registration(node, [{ shard: "s1", replica: "r1", gpus: [6, 7] }]);
      reg.gpus = reg.gpus.slice(0, 7); // GPU 7 fell off the bus under a running engine
      const a = await TestAgent.connect({
        baseUrl: gw.url,
        protocol: "grpc-web",
        tls: tls(node),
        registration: reg,
      });
      try {
        assert.equal(codeOf(await a.close()), "OK");
      } finally {
        a.abort();
      }
      const evs = await closedWith(node, SessionClosed_Reason.DISCONNECTED);
      const opened = evs[0];
      assert.ok(opened?.case === "sessionOpened");
      assert.equal(opened.value.registration?.gpus.length, 7);
      assert.deepEqual(opened.value.registration?.runningShards[0]?.gpuIndices, [6, 7]);
      assert.deepEqual(opened.value.registration?.fabrics[0]?.gpuIndices, [0, 1, 2, 3, 4, 5, 6, 7]);
    });

    it("ends a session whose re-registration contradicts itself, recording no hardware change", async () => {
      const node = "gpu-dup-rereg";
      await endsWithProtocolError(
        node,
        undefined,
        (a) => a.register(h100Registration(node, [{ shard: "s1", replica: "r1", gpus: [2, 3, 2] }])),
        { code: "InvalidArgument", message: /running_shards\[0\]\.gpu_indices\[2\]: GPU 2 is listed twice/ },
      );
      await served();
    });
  });

  describe("floods and unknown values", () => {
    it("a flood of heartbeats makes events only by the usage rule, and no acks", async () => {
      const node = "gpu-flood";
      const a = await registered(node, "grpc");
      try {
        const quiet = Array.from({ length: 8 }, () => 100n); // under the 1024 MiB threshold
        const busy = Array.from({ length: 8 }, () => 40_000n);
        for (let i = 0; i < 1500; i++) a.heartbeat({ gpuMemoryUsedMb: quiet });
        a.heartbeat({ gpuMemoryUsedMb: busy }); // moved past the threshold: one event
        for (let i = 0; i < 500; i++) {
          // Two problems, each new once, however often repeated; within the
          // usage interval of the event before, so they wait for its end (here
          // the close) and make one event together.
          a.heartbeat({ gpuMemoryUsedMb: busy, newProblems: [i % 2 === 0 ? "Xid 48" : "Xid 63"] });
        }
        const last = a.shardStatus({ shardId: "s1", state: ShardStatus_State.RUNNING });
        await a.waitForAck(last, 30_000);
        const acks = a.received.filter((m) => m.msg.case === "ack").map((m) => m.msg.value);
        assert.deepEqual(
          acks.map((v) => (v && "messageId" in v ? v.messageId : "")),
          ["register", String(last)],
        );
        assert.equal(codeOf(await a.close()), "OK");
      } finally {
        a.abort();
      }
      const evs = await closedWith(node, SessionClosed_Reason.DISCONNECTED);
      assert.deepEqual(
        evs.map((b) => b.case),
        ["sessionOpened", "usageChanged", "shardStatus", "usageChanged", "sessionClosed"],
      );
      const problems = evs.flatMap((b) => (b.case === "usageChanged" ? [b.value.newProblems] : []));
      assert.deepEqual(problems, [[], ["Xid 48", "Xid 63"]]);
      await served();
    });

    it("records unknown enum values as sent (a newer agent), and ignores an unknown message kind", async () => {
      const node = "gpu-enum";
      allowed.add(node);
      const reg = h100Registration(node, [{ shard: "s0", replica: "r0", gpus: [0] }]);
      reg.runningShards[0]!.state = 42 as ShardStatus_State;
      const raw = new RawAgent(gw.url, tls(node));
      try {
        const body = Buffer.concat([
          frame(encode({ msg: { case: "register", value: reg } })),
          // AgentMessage field 9 (a kind this gateway does not know): kept alive, not recorded.
          frame(Buffer.from([0x4a, 0x02, 0x08, 0x01])),
          frame(encode({ msg: { case: "shard", value: { shardId: "s0", state: 99 as ShardStatus_State } } })),
        ]);
        for (const protocol of PROTOCOLS) {
          const r = await raw.call(protocol, body);
          assert.equal(r.code, "OK", `${protocol}: ${r.message}`);
          const acks = r.messages.map((m) => (m.msg.case === "ack" ? m.msg.value.messageId : m.msg.case));
          assert.deepEqual(acks, ["register", "3"], protocol);
        }
      } finally {
        raw.close();
      }
      const records = await waitForLog(
        log,
        (rs) => eventsOf(rs, node).filter((b) => b.case === "sessionClosed").length === 3,
        "three closed sessions of gpu-enum",
      );
      const evs = eventsOf(records, node);
      assert.deepEqual(
        evs.map((b) => b.case),
        Array.from({ length: 3 }, () => ["sessionOpened", "shardStatus", "sessionClosed"]).flat(),
      );
      for (const b of evs) {
        if (b.case === "sessionOpened") assert.equal(b.value.registration?.runningShards[0]?.state, 42);
        if (b.case === "shardStatus") assert.equal(b.value.status?.state, 99);
      }
      await served();
    });
  });

  describe("ids that would reach an object's prototype in the projected state", () => {
    const cases = RESERVED_IDS;
    for (const [i, [what, msg, message]] of cases.entries()) {
      it(`ends the session on ${what} (InvalidArgument), recording nothing of it`, async () => {
        const node = `gpu-reserved-${i}`;
        await endsWithProtocolError(node, PROTOCOLS[i % PROTOCOLS.length], (a) => a.send(msg(node)), {
          code: "InvalidArgument",
          message,
        });
      });
    }

    it("refuses a registration running replica __proto__", async () => {
      const node = "gpu-reserved-reg";
      const err = await refused({
        tls: tls(node),
        registration: h100Registration(node, [{ shard: "s1", replica: "__proto__", gpus: [0] }]),
      });
      assert.equal(codeOf(err), "InvalidArgument");
      assert.match(String(err), /running_shards\[0\]\.replica_id "__proto__" is a reserved name/);
      await served();
    });
  });

  describe("endpoints that routers could not use", () => {
    const cases = BAD_ENDPOINTS;
    for (const [i, [what, endpoint, message]] of cases.entries()) {
      it(`ends the session on a shard status whose endpoint is ${what} (InvalidArgument)`, async () => {
        await endsWithProtocolError(
          `gpu-endpoint-${i}`,
          PROTOCOLS[i % PROTOCOLS.length],
          (a) =>
            a.shardStatus({ replicaId: "r1", shardId: "s1", state: ShardStatus_State.RUNNING, endpoint }),
          { code: "InvalidArgument", message },
        );
      });
    }

    it("refuses a registration whose running shard names an endpoint that is not a URL", async () => {
      const node = "gpu-endpoint-reg";
      const reg = h100Registration(node, [{ shard: "s1", replica: "r1", gpus: [0] }]);
      const err = await refused({
        tls: tls(node),
        registration: {
          ...reg,
          runningShards: reg.runningShards?.map((s) => ({ ...s, endpoint: "ftp://h/x" })),
        },
      });
      assert.equal(codeOf(err), "InvalidArgument");
      assert.match(String(err), /running_shards\[0\]\.endpoint "ftp:\/\/h\/x" is not an http/);
      await served();
    });
  });

  describe("protobuf JSON", () => {
    it("refuses values no schema allows and pollutes no prototype, in all three protocols", async () => {
      const node = "gpu-json";
      allowed.add(node);
      const raw = new RawAgent(gw.url, tls(node));
      const json = (s: string) => frame(Buffer.from(s));
      try {
        for (const protocol of PROTOCOLS) {
          for (const body of [
            `{"register":{"nodeId":"${node}","labels":{"__proto__":{"polluted":"yes"}}}}`,
            `{"register":{"nodeId":"${node}","gpus":[{"index":1e30}]}}`,
            `{"register":{"nodeId":"${node}","gpus":[{"memoryTotalMb":"99999999999999999999999"}]}}`,
            `{"register":{"nodeId":"${node}","gpus":${"[".repeat(20_000)}${"]".repeat(20_000)}}}`,
          ]) {
            const r = await raw.call(protocol, json(body), 10_000, "json");
            assert.equal(r.code, "InvalidArgument", `${protocol} ${body.slice(0, 80)}: ${r.message}`);
          }
          assert.equal((Object.prototype as Record<string, unknown>)["polluted"], undefined);
          // A well-formed JSON registration is served like a binary one; an unknown field (a newer agent) is ignored.
          const ok = await raw.call(
            protocol,
            json(JSON.stringify({ register: { nodeId: node, labels: { constructor: "x" }, extra: true } })),
            10_000,
            "json",
          );
          assert.equal(ok.code, "OK", ok.message);
          assert.deepEqual(
            ok.messages.map((m) => m.msg.case),
            ["ack"],
          );
        }
      } finally {
        raw.close();
      }
      await served();
    });
  });

  describe("node ids with odd characters never become subjects", () => {
    const odd = ODD_NODE_IDS;
    /** openssl puts these into a CN; the others cannot be a certificate's name. */
    const inCert = (id: string) =>
      id.length > 0 && id.length <= 64 && ![...id].some((c) => c.charCodeAt(0) < 0x20);

    for (const [what, id] of odd) {
      it(`refuses a node id with ${what} (InvalidArgument, with and without TLS)`, async () => {
        const attempts: Array<[string, Omit<TestAgentOptions, "baseUrl">, string]> = [
          ["insecure-dev", { registration: h100Registration(id) }, dev.url],
        ];
        // With a certificate naming exactly this id, so only the id rule can refuse it.
        if (inCert(id)) attempts.push(["mTLS", { tls: tls(id), registration: h100Registration(id) }, gw.url]);
        for (const [how, opts, url] of attempts) {
          const err = await refused(opts, url);
          assert.equal(codeOf(err), "InvalidArgument", how);
          assert.match(String(err), /node_id/, how);
          // The answer names the id only when it is short; a long one is not echoed.
          assert.ok(String(err).length < 400, `${how}: ${String(err).length} characters`);
        }
        // Both gateways still serve agents after the refusals.
        await served("connect", "tls");
        await served("grpc-web", "dev");
      });
    }

    // DNS names are let in; their dots stay inside one subject token, whatever they spell.
    it("lets in DNS names that spell subjects, each on one token of its own subjects", async () => {
      for (const node of ["llmgw.evt.catalog", `${prefix}.reconciler`, "gpu-1.dc1.example.com"]) {
        const a = await registered(node);
        try {
          await a.waitForAck(a.shardStatus({ shardId: "s", state: ShardStatus_State.RUNNING }));
          assert.equal(codeOf(await a.close()), "OK");
        } finally {
          a.abort();
        }
        await closedWith(node, SessionClosed_Reason.DISCONNECTED);
        const subjects = (await readAll(log)).filter((r) => nodeOf(r) === node).map((r) => r.subject);
        const token = node.replaceAll(".", "_");
        assert.deepEqual(
          [...new Set(subjects)].sort(),
          [`${prefix}.node.${token}`, `${prefix}.session.${token}`],
          node,
        );
      }
    });
  });

  describe("certificates", () => {
    for (const protocol of PROTOCOLS) {
      it(`refuses another node's certificate, naming both (${protocol})`, async () => {
        const err = await refused({ protocol, tls: tls("gpu-c1"), registration: h100Registration("gpu-c2") });
        assert.equal(codeOf(err), "PermissionDenied");
        assert.match(String(err), /certificate authorizes node "gpu-c1", not "gpu-c2"/);
        await served(protocol);
      });

      it(`refuses an expired certificate, saying so (${protocol})`, async () => {
        const err = await refused({
          protocol,
          tls: { ca: certs.ca, ...certs.expiredClient("gpu-c3") },
          registration: h100Registration("gpu-c3"),
        });
        assert.equal(codeOf(err), "Unauthenticated");
        assert.match(String(err), /CN "gpu-c3"\) did not verify: it expired on Jan\s+2 00:00:00 2020 GMT/);
        assert.match(String(err), /CERT_HAS_EXPIRED/);
        await served(protocol);
      });

      it(`refuses a certificate signed by another CA, saying so (${protocol})`, async () => {
        const err = await refused({
          protocol,
          tls: { ca: certs.ca, ...certs.foreignClient("gpu-c4") },
          registration: h100Registration("gpu-c4"),
        });
        assert.equal(codeOf(err), "Unauthenticated");
        assert.match(String(err), /did not verify: it is not signed by the gateway's client CA/);
        await served(protocol);
      });

      it(`refuses a stream without a certificate (${protocol})`, async () => {
        const err = await refused({
          protocol,
          tls: { ca: certs.ca },
          registration: h100Registration("gpu-c5"),
        });
        assert.equal(codeOf(err), "Unauthenticated");
        assert.match(String(err), /no client certificate/);
      });
    }
  });

  /** The log the tests left: only subjects of the layout and events of admitted nodes; it folds cleanly. */
  async function assertHygienicLog() {
    // One admitted node at least, whichever tests ran.
    await served();
    const records = await readAll(log);
    assertLogHygiene(records, prefix, (n) => allowed.has(n));
    // The log folds, and folding it pollutes nothing.
    const state = foldFleet(records);
    assert.ok(state.inventory.nodes.keys().length > 0);
    assert.equal(Object.hasOwn(Object.prototype, "session"), false);
    assert.equal(Object.hasOwn(Object, "session"), false);
    const opened = new Set(records.filter((r) => r.event.body.case === "sessionOpened").map(nodeOf));
    for (const n of allowed) assert.ok(opened.has(n), `${n} has a session`);
  }
});

function varint(n: number): Buffer {
  const out: number[] = [];
  let x = n;
  while (x > 127) {
    out.push((x & 127) | 128);
    x >>>= 7;
  }
  out.push(x);
  return Buffer.from(out);
}
