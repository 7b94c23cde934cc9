import assert from "node:assert/strict";
import * as http2 from "node:http2";
import { describe, it } from "node:test";
import { SessionClosed_Reason } from "../../src/gen/llmgw/v1/events_pb.js";
import { assertServed, codeOf, TestAgent, type TestAgentOptions } from "../support/agent.js";
import { readAll, waitForLog } from "../support/gateway.js";
import { h100Registration } from "../support/sample-events.js";
import { gatewaySuite } from "../support/suites.js";

describe("gateway: bad input gets the right error and harms no one else", () => {
  const env = gatewaySuite("GWBAD", {
    withCerts: true,
    gateway: () => ({ registrationTimeoutMs: 1_000, readMaxBytes: 64 * 1024 }),
  });
  let good = 0;

  const tls = env.tls;

  /** Runs a stream that must fail, returning its error. */
  async function refused(opts: Omit<TestAgentOptions, "baseUrl">): Promise<Error | undefined> {
    const a = TestAgent.open({ baseUrl: env.gw.url, ...opts });
    try {
      return await a.ended;
    } finally {
      a.abort();
    }
  }

  /** Another agent still registers, reports and gets its ack. */
  async function othersStillServed() {
    const node = `gpu-good-${++good}`;
    await assertServed({ baseUrl: env.gw.url, tls: tls(node), registration: h100Registration(node) });
  }

  it("refuses a stream whose first message is not a Register", async () => {
    const err = await refused({
      tls: tls("gpu-b1"),
      registration: h100Registration("gpu-b1"),
      firstMessage: { msg: { case: "heartbeat", value: {} } },
    });
    assert.equal(codeOf(err), "InvalidArgument");
    assert.match(String(err), /first message must be a Register, got heartbeat/);
    await othersStillServed();
  });

  it("refuses a node id the certificate does not authorize, naming both", async () => {
    const err = await refused({ tls: tls("gpu-b2"), registration: h100Registration("gpu-b3") });
    assert.equal(codeOf(err), "PermissionDenied");
    assert.match(String(err), /certificate authorizes node "gpu-b2", not "gpu-b3"/);
    await othersStillServed();
  });

  it("refuses an agent without a client certificate", async () => {
    const err = await refused({ tls: { ca: env.certs.ca }, registration: h100Registration("gpu-b4") });
    assert.equal(codeOf(err), "Unauthenticated");
    assert.match(String(err), /no client certificate/);
    await othersStillServed();
  });

  it("refuses a certificate from another CA", async () => {
    const err = await refused({
      tls: { ca: env.certs.ca, ...env.certs.foreignClient("gpu-b5") },
      registration: h100Registration("gpu-b5"),
    });
    assert.equal(codeOf(err), "Unauthenticated");
    assert.match(String(err), /did not verify/);
    await othersStillServed();
  });

  for (const [what, id] of [
    ["empty", ""],
    ["a*b", "a*b"],
    ["a>b", "a>b"],
    ["a b", "a b"],
    ["UPPER", "UPPER"],
    ["in upper case", "GPU-B6"],
    ["with an underscore", "gpu_b6"],
    ["with a wildcard", "gpu-*"],
    ["with a >", "gpu->"],
    ["with a space", "gpu b6"],
    ["too long", "g".repeat(254)],
  ] as const) {
    it(`refuses a node id ${what} before anything else`, async () => {
      // The certificate matches (where a CN can hold it), so only the pattern can refuse it.
      const err = await refused({
        tls: tls(id.length > 64 ? "gpu-long" : id),
        registration: h100Registration(id),
      });
      assert.equal(codeOf(err), "InvalidArgument");
      assert.match(String(err), /node_id .*must be a DNS name \(RFC 1123\)/);
      await othersStillServed();
    });
  }

  it("refuses an advertise_address that is neither a DNS name nor an IP address, naming the field", async () => {
    const err = await refused({
      tls: tls("gpu-ba1"),
      registration: { ...h100Registration("gpu-ba1"), advertiseAddress: "gpu-ba1:8000; rm -rf /" },
    });
    assert.equal(codeOf(err), "InvalidArgument");
    assert.match(
      String(err),
      /invalid registration: advertise_address "gpu-ba1:8000; rm -rf \/" must be empty/,
    );
    await othersStillServed();
  });

  it("refuses an oversized message", async () => {
    const reg = { ...h100Registration("gpu-b7"), labels: { blob: "x".repeat(100 * 1024) } };
    const err = await refused({ tls: tls("gpu-b7"), registration: reg });
    assert.equal(codeOf(err), "ResourceExhausted");
    await othersStillServed();
  });

  it("refuses garbage bytes sent straight over HTTP/2", async () => {
    const c = tls("gpu-b8");
    const session = http2.connect(env.gw.url, { ca: c.ca, cert: c.cert, key: c.key });
    try {
      for (const body of [
        // A gRPC frame whose payload is not protobuf.
        Buffer.from([0, 0, 0, 0, 6, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]),
        // A frame header announcing more than is sent.
        Buffer.from([0, 0, 0, 1, 0, 0x0a, 0x02]),
      ]) {
        const status = await new Promise<string>((resolve, reject) => {
          const req = session.request({
            ":method": "POST",
            ":path": "/llmgw.v1.AgentService/Connect",
            "content-type": "application/grpc+proto",
            te: "trailers",
          });
          let headers: http2.IncomingHttpHeaders = {};
          req.on("response", (h) => {
            headers = h;
          });
          req.on("trailers", (t) => resolve(String(t["grpc-status"] ?? headers["grpc-status"])));
          req.on("end", () => resolve(String(headers["grpc-status"])));
          req.on("error", reject);
          req.resume();
          req.end(body);
        });
        assert.equal(status, "3", `InvalidArgument for ${body.toString("hex")}`);
      }
    } finally {
      session.destroy();
    }
    await othersStillServed();
  });

  it("closes a stream that never registers", async () => {
    const err = await refused({
      tls: tls("gpu-b9"),
      registration: h100Registration("gpu-b9"),
      firstMessage: null,
    });
    assert.equal(codeOf(err), "DeadlineExceeded");
    assert.match(String(err), /no Register within/);
    await othersStillServed();
  });

  it("takes a re-registration as hardware changed, and refuses one naming another node", async () => {
    const node = "gpu-b10";
    const a = await TestAgent.connect({
      baseUrl: env.gw.url,
      tls: tls(node),
      registration: h100Registration(node),
    });
    try {
      const hw = h100Registration(node);
      hw.gpus = hw.gpus.slice(0, 7); // a GPU fell out
      await a.waitForAck(a.register(hw));
      a.register(h100Registration("gpu-b11"));
      const err = await a.ended;
      assert.equal(codeOf(err), "InvalidArgument");
      assert.match(String(err), /re-registration names node "gpu-b11"/);
    } finally {
      a.abort();
    }
    const records = await waitForLog(
      env.log,
      (rs) =>
        rs.some(
          (r) =>
            r.event.body.case === "sessionClosed" &&
            r.event.body.value.nodeId === node &&
            r.event.body.value.reason === SessionClosed_Reason.PROTOCOL_ERROR,
        ),
      "the protocol-error close",
    );
    const changed = records.find((r) => r.event.body.case === "hardwareChanged")?.event.body;
    assert.ok(changed?.case === "hardwareChanged");
    assert.equal(changed.value.registration?.gpus.length, 7);
    await othersStillServed();
  });

  it("wrote no event for any refused stream", async () => {
    const records = await readAll(env.log);
    const opened = records
      .map((r) => r.event.body)
      .filter((b) => b.case === "sessionOpened")
      .map((b) => b.value.nodeId);
    assert.ok(
      opened.every((n) => n.startsWith("gpu-good-") || n === "gpu-b10"),
      opened.join(", "),
    );
  });
});
