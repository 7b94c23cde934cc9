import assert from "node:assert/strict";
import { X509Certificate } from "node:crypto";
import { describe, it } from "node:test";
import { ShardStatus_State } from "../../src/gen/llmgw/v1/agent_pb.js";
import { SessionClosed_Reason } from "../../src/gen/llmgw/v1/events_pb.js";
import { codeOf, TestAgent } from "../support/agent.js";
import { runCli } from "../support/cli.js";
import { eventually } from "../support/eventually.js";
import {
  type GatewayProcess,
  gatewayArgs,
  metricValue,
  rand,
  readAll,
  spawnGateway,
  waitForLog,
} from "../support/gateway.js";
import { h100Registration } from "../support/sample-events.js";
import { openTestLog, serverSuite } from "../support/suites.js";

/** Generous: the watch reaches a gateway in milliseconds; this only bounds a hang. */
const CUT_OFF_BOUND_MS = 5_000;

async function endedWithin(a: TestAgent, ms: number, what: string): Promise<unknown> {
  let timer: NodeJS.Timeout | undefined;
  const bound = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: the stream was still open after ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([a.ended, bound]);
  } finally {
    clearTimeout(timer);
  }
}

describe("revocation: llmgw revoke applies live on every gateway", () => {
  const env = serverSuite();

  it("cuts off a revoked CN (PermissionDenied, SessionClosed REVOKED), refuses its reconnects, revokes one serial, and lets it back after unrevoke", async (t) => {
    const { log, stream, prefix, close } = await openTestLog(env.server.url, "GWREV");
    const bucket = `revoked_${rand()}`;
    const bucketFlags = ["--nats", env.server.url, "--revoked-bucket", bucket];
    const gws: GatewayProcess[] = [];
    const agents: TestAgent[] = [];
    const connect = async (gw: GatewayProcess, node: string) => {
      const a = await TestAgent.connect({
        baseUrl: gw.url,
        tls: env.tls(node),
        registration: h100Registration(node),
      });
      agents.push(a);
      return a;
    };
    try {
      for (const id of ["gw-rev-a", "gw-rev-b"]) {
        gws.push(
          await spawnGateway(
            gatewayArgs(
              { id, nats: env.server.url, stream, prefix, revokedBucket: bucket },
              // The agents say nothing between registering and being revoked, four
              // CLI runs later; on a loaded machine that took longer than the default
              // heartbeat timeout, and the stream closed as silent before it was revoked.
              "--heartbeat-timeout",
              "120000",
            ),
            env.certs,
          ),
        );
      }
      const [gwA, gwB] = gws as [GatewayProcess, GatewayProcess];
      const revokedA = await connect(gwA, "gpu-rev-1");
      const revokedB = await connect(gwB, "gpu-rev-1-b");
      const bystander = await connect(gwA, "gpu-rev-2");
      const bySerial = await connect(gwB, "gpu-rev-3");

      // Bad input is refused before anything is written, naming what is wrong.
      const badCn = await runCli(["revoke", "Not_A_Node", ...bucketFlags]);
      assert.equal(badCn.code, 2, badCn.stderr);
      assert.match(badCn.stderr, /Not_A_Node/);
      const badSerial = await runCli(["revoke", "gpu-rev-3", "--serial", "xyz", ...bucketFlags]);
      assert.equal(badSerial.code, 2, badSerial.stderr);
      assert.match(badSerial.stderr, /--serial/);

      // One CN revoked: its stream closes, whichever gateway holds it.
      for (const a of [revokedA, revokedB]) {
        const r = await runCli(["revoke", a.nodeId, "--reason", "key leaked", ...bucketFlags]);
        assert.equal(r.code, 0, r.stderr);
        assert.match(r.stdout, new RegExp(`revoked CN ${a.nodeId}`));
        const written = Date.now();
        const err = await endedWithin(a, CUT_OFF_BOUND_MS, `${a.nodeId} revoked`);
        t.diagnostic(`${a.nodeId}: stream closed ${Date.now() - written} ms after llmgw revoke returned`);
        assert.equal(codeOf(err), "PermissionDenied");
        assert.match(String(err), /revoked: key leaked/);
      }
      const records = await waitForLog(
        log,
        (rs) =>
          rs.filter(
            (r) =>
              r.event.body.case === "sessionClosed" &&
              r.event.body.value.reason === SessionClosed_Reason.REVOKED,
          ).length === 2,
        "two sessions closed as revoked",
      );
      const closed = records.find(
        (r) => r.event.body.case === "sessionClosed" && r.event.body.value.sessionId === revokedA.sessionId,
      )?.event.body;
      assert.ok(closed?.case === "sessionClosed");
      assert.equal(closed.value.reason, SessionClosed_Reason.REVOKED);
      assert.match(closed.value.detail, /CN "gpu-rev-1" is revoked: key leaked/);

      // Its reconnects are refused, on both gateways.
      for (const gw of gws) {
        const again = TestAgent.open({
          baseUrl: gw.url,
          tls: env.tls("gpu-rev-1"),
          registration: h100Registration("gpu-rev-1"),
        });
        agents.push(again);
        const err = await again.ended;
        assert.equal(codeOf(err), "PermissionDenied");
        assert.match(String(err), /revoked/);
        assert.equal(again.sessionId, "", "refused at registration: no session opened");
      }
      const openings = (await readAll(log)).filter(
        (r) => r.event.body.case === "sessionOpened" && r.event.body.value.nodeId === "gpu-rev-1",
      );
      assert.equal(openings.length, 1, "the refused reconnects opened no session");
      // Nobody else is touched.
      assert.equal(bystander.done, false);
      await bystander.waitForAck(bystander.shardStatus({ shardId: "s1", state: ShardStatus_State.RUNNING }));

      // One certificate, by its serial (colons and case as openssl prints them).
      const serial = new X509Certificate(env.certs.client("gpu-rev-3").cert).serialNumber;
      const spelled = (serial.toLowerCase().match(/../g) ?? []).join(":");
      const r = await runCli(["revoke", "gpu-rev-3", "--serial", spelled, ...bucketFlags]);
      assert.equal(r.code, 0, r.stderr);
      const err = await endedWithin(bySerial, CUT_OFF_BOUND_MS, "gpu-rev-3 revoked by serial");
      assert.equal(codeOf(err), "PermissionDenied");
      assert.match(String(err), /certificate serial/);

      // Lifted: the agent registers again.
      const lifted = await runCli(["unrevoke", "gpu-rev-1", ...bucketFlags]);
      assert.equal(lifted.code, 0, lifted.stderr);
      assert.match(lifted.stdout, /may connect again/);
      await eventually(
        async () => {
          await connect(gwA, "gpu-rev-1");
          return true;
        },
        { what: "gpu-rev-1 registering after unrevoke", timeoutMs: 10_000 },
      );

      assert.ok(
        (await metricValue(gwA.metricsUrl!, "llmgw_gateway_revocations_applied_total", 'action="closed"')) >=
          1,
      );
      assert.ok(
        (await metricValue(gwA.metricsUrl!, "llmgw_gateway_revocations_applied_total", 'action="refused"')) >=
          1,
      );
    } finally {
      for (const a of agents) a.abort();
      for (const gw of gws) gw.proc.kill("SIGKILL");
      await Promise.all(gws.map((g) => g.exited));
      await close();
    }
  });
});
