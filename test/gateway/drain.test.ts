import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Kvm } from "@nats-io/kv";
import { SessionClosed_Reason } from "../../src/gen/llmgw/v1/events_pb.js";
import { codeOf, TestAgent } from "../support/agent.js";
import {
  type GatewayProcess,
  gatewayArgs,
  rand,
  readAll,
  spawnGateway,
  waitForLog,
} from "../support/gateway.js";
import { h100Registration } from "../support/sample-events.js";
import { openTestLog, serverSuite } from "../support/suites.js";

describe("gateway process: SIGTERM drains", () => {
  const env = serverSuite();

  it("tells agents to reconnect, records draining and stopped, releases its lease and exits", async () => {
    const { log, stream, prefix } = await openTestLog(env.server.url, "GWDRAIN");
    const bucket = `leases_${rand()}`;
    let gw: GatewayProcess | undefined;
    const agents: TestAgent[] = [];
    try {
      gw = await spawnGateway(
        gatewayArgs(
          { id: "gw-drain", nats: env.server.url, stream, prefix, leaseBucket: bucket },
          ...["--drain-deadline", "8000"],
        ),
        env.certs,
      );
      for (const node of ["gpu-drain-1", "gpu-drain-2"]) {
        agents.push(
          await TestAgent.connect({
            baseUrl: gw.url,
            tls: env.tls(node),
            registration: h100Registration(node),
          }),
        );
      }
      const kv = await new Kvm(log.nc).open(bucket);
      assert.equal((await kv.get("gw-drain"))?.operation, "PUT", "the gateway holds its lease");

      gw.proc.kill("SIGTERM");
      for (const a of agents) {
        const m = await a.waitFor((x) => x.msg.case === "reconnect", { what: "Reconnect" });
        assert.ok(m.msg.case === "reconnect");
        assert.match(m.msg.value.reason, /gw-drain is shutting down/);
        assert.equal(codeOf(await a.ended), "OK");
      }
      assert.equal(await gw.exited, 0, gw.output());
      if (process.env["SHOW_GW"]) console.log(gw.output());

      const records = await waitForLog(
        log,
        (rs) => rs.some((r) => r.event.body.case === "gatewayStopped"),
        "the gateway stopped",
      );
      const kinds = records.map((r) => r.event.body.case);
      const draining = kinds.indexOf("gatewayDraining");
      const stopped = kinds.indexOf("gatewayStopped");
      assert.ok(
        kinds[0] === "gatewayStarted" && draining > 0 && stopped === kinds.length - 1,
        kinds.join(", "),
      );
      const closes = records
        .slice(draining, stopped)
        .map((r) => r.event.body)
        .filter((b) => b.case === "sessionClosed");
      assert.equal(closes.length, 2);
      for (const c of closes) assert.equal(c.value.reason, SessionClosed_Reason.GATEWAY_DRAINING);
      const d = records[draining]!.event.body;
      assert.ok(d.case === "gatewayDraining");
      assert.equal(d.value.openSessions, 2);
      const entry = await kv.get("gw-drain");
      assert.ok(entry === null || entry.operation !== "PUT", "the lease was released");
      assert.ok((await readAll(log)).length === records.length);
    } finally {
      for (const a of agents) a.abort();
      if (gw && gw.proc.exitCode === null) gw.proc.kill("SIGKILL");
      await log.jsm.streams.delete(stream).catch(() => {});
      await log.close();
    }
  });
});
