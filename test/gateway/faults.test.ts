import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { ShardStatus_State } from "../../src/gen/llmgw/v1/agent_pb.js";
import { EventSchema, SessionClosed_Reason, Writer_Kind } from "../../src/gen/llmgw/v1/events_pb.js";
import { type NatsServer, startServer, tempDir } from "../harness/nats.js";
import { codeOf, TestAgent } from "../support/agent.js";
import { makeTestCerts, type TestCerts } from "../support/certs.js";
import { runCheckLog } from "../support/cli.js";
import { readAll, waitForLog } from "../support/gateway.js";
import { h100Registration } from "../support/sample-events.js";
import { startGatewayOnNewLog } from "../support/suites.js";

describe("gateway: NATS restarted or killed under connected agents", () => {
  let server: NatsServer & { close(): Promise<void> };
  let certs: TestCerts;
  before(async () => {
    server = await startServer();
    certs = makeTestCerts();
  });
  after(async () => {
    await server?.close();
  });

  /**
   * Three agents report in bursts while NATS goes down under them and comes
   * back on the same port and store; afterwards commands still reach them,
   * every event id is stored once, and every message an agent saw
   * acknowledged is in the log (`llmgw check-log --acked` over the log).
   * With `killed`, NATS dies at once (no graceful shutdown): a report each
   * agent sends as the fault begins must then be acknowledged only after
   * NATS runs again (its publish spanned the fault).
   */
  async function restartUnderLoad(fault: (s: NatsServer) => Promise<void>, opts: { killed?: boolean } = {}) {
    const on = await startGatewayOnNewLog(server.url, "GWFAULT", {
      certs,
      publishTimeoutMs: 1_000,
      logUnavailableLimitMs: 60_000,
      heartbeatTimeoutMs: 60_000,
    });
    const { log, stream, prefix, gw } = on;
    const agents: TestAgent[] = [];
    try {
      for (let i = 1; i <= 3; i++) {
        const node = `gpu-fault-${i}`;
        agents.push(
          await TestAgent.connect({
            baseUrl: gw.url,
            tls: { ca: certs.ca, ...certs.client(node) },
            registration: h100Registration(node),
            autoAnswer: true,
          }),
        );
      }
      // Each agent reports in bursts, each burst waiting for its acks.
      let restarted = false;
      let roundsAfter = 0;
      const burst = async (a: TestAgent, n: number) => {
        const seqs: number[] = [];
        for (let i = 0; i < n; i++) {
          seqs.push(a.shardStatus({ shardId: `s-${a.sent}`, state: ShardStatus_State.RUNNING }));
        }
        for (const s of seqs) await a.waitForAck(s, 60_000);
      };
      const load = (async () => {
        while (!restarted || roundsAfter < 3) {
          await Promise.all(agents.map((a) => burst(a, 20)));
          if (restarted) roundsAfter++;
        }
      })();
      // Let some traffic flow, then bring the server down and up on the same port and store.
      await waitForLog(log, (rs) => rs.length > 30, "traffic before the restart");
      // One more report per agent, queued in the same turn as the signal: with
      // SIGKILL, NATS is gone before the gateway can have read it.
      const spanning = opts.killed
        ? agents.map((a) => {
            const seq = a.shardStatus({ shardId: `s-${a.sent}`, state: ShardStatus_State.RUNNING });
            const ackedAt = a.waitForAck(seq, 60_000).then(() => Date.now());
            ackedAt.catch(() => {}); // awaited below
            return { node: a.nodeId, seq, ackedAt };
          })
        : [];
      await fault(server);
      restarted = true;
      await load;
      for (const p of spanning) {
        const at = await p.ackedAt;
        assert.ok(
          at >= server.startedAt,
          `${p.node}: message ${p.seq}, sent as NATS was killed, was acknowledged ${server.startedAt - at} ms before NATS was started again: acknowledged without being stored`,
        );
      }

      // Commands still reach agents after the restart: the relay follower survived.
      const records = await waitForLog(log, (rs) => rs.length > 0, "the log after the restart");
      const sessions = new Map<string, string>();
      for (const r of records) {
        if (r.event.body.case === "sessionOpened")
          sessions.set(r.event.body.value.nodeId, r.event.body.value.sessionId);
      }
      const target = agents[0]!;
      await log.append(
        create(EventSchema, {
          id: "pass-after-restart",
          timeUnixMs: BigInt(Date.now()),
          writer: { kind: Writer_Kind.RECONCILER, id: "rec-test" },
          body: {
            case: "reconcilePass",
            value: {
              // Decided on the log as it is: the checker verifies the command's session against it.
              observedSeq: BigInt(await log.lastSeq()),
              commands: [
                {
                  commandId: "cmd-after",
                  nodeId: target.nodeId,
                  sessionId: sessions.get(target.nodeId)!,
                  action: {
                    case: "drain",
                    value: { shardId: "s-1", deadlineUnixMs: BigInt(Date.now() + 60_000) },
                  },
                },
              ],
            },
          },
        }),
      );
      await target.waitFor((m) => m.msg.case === "drain", { timeoutMs: 30_000 });

      // What the agents saw acknowledged, taken before they close.
      const agentAcks = agents.flatMap((a) => a.acked());
      for (const a of agents) assert.equal(codeOf(await a.close()), "OK");
      const all = await waitForLog(
        log,
        (rs) => rs.filter((r) => r.event.body.case === "sessionClosed").length === agents.length,
        "every session closed",
      );
      const closed = all.filter((r) => r.event.body.case === "sessionClosed").map((r) => r.event.body);
      for (const c of closed)
        assert.ok(c.case === "sessionClosed" && c.value.reason === SessionClosed_Reason.DISCONNECTED);

      // The checker over the whole log: every event id once, every acked message present once.
      const file = join(tempDir("gw-fault"), "acked.jsonl");
      writeFileSync(file, agentAcks.map((a) => JSON.stringify(a)).join("\n"));
      const check = await runCheckLog({ nats: server.url, stream, prefix, acked: file });
      assert.equal(check.code, 0, `check-log --acked over the log:\n${check.stdout}${check.stderr}`);
      assert.match(
        check.stdout,
        new RegExp(`${agentAcks.length} acknowledged messages: every invariant holds`),
      );
    } finally {
      for (const a of agents) a.abort();
      await on.close();
    }
  }

  it("NATS restarted (SIGTERM): loses no acknowledged event and stores none twice; relaying resumes", () =>
    restartUnderLoad((s) => s.restart()));

  it("NATS killed (kill -9) with agents publishing: loses no acknowledged event and stores none twice; relaying resumes", () =>
    restartUnderLoad(
      async (s) => {
        await s.kill();
        await s.restart();
      },
      { killed: true },
    ));

  it("disconnects an agent that stops reading its commands (slow consumer)", async () => {
    const on = await startGatewayOnNewLog(server.url, "GWSLOW", { certs, sendQueueMax: 8 });
    const { log, gw } = on;
    let agent: TestAgent | undefined;
    try {
      const node = "gpu-slow-1";
      agent = await TestAgent.connect({
        baseUrl: gw.url,
        tls: { ca: certs.ca, ...certs.client(node) },
        registration: h100Registration(node),
      });
      agent.pauseReading();
      const session = (await readAll(log)).map((r) => r.event.body).find((b) => b.case === "sessionOpened");
      assert.ok(session?.case === "sessionOpened");
      // Big commands fill the HTTP/2 window quickly, then the send queue.
      const args = ["--max-model-len", "x".repeat(16 * 1024)];
      for (let p = 0; p < 40 && !agent.done && gw.registry.size > 0; p++) {
        await log.append(
          create(EventSchema, {
            id: `pass-slow-${p}`,
            timeUnixMs: BigInt(Date.now()),
            writer: { kind: Writer_Kind.RECONCILER, id: "rec-test" },
            body: {
              case: "reconcilePass",
              value: {
                commands: Array.from({ length: 4 }, (_, i) => ({
                  commandId: `c-${p}-${i}`,
                  nodeId: node,
                  sessionId: session.value.sessionId,
                  action: { case: "start" as const, value: { shardId: `s-${p}-${i}`, engineArgs: args } },
                })),
              },
            },
          }),
        );
      }
      const records = await waitForLog(
        log,
        (rs) => rs.some((r) => r.event.body.case === "sessionClosed"),
        "the slow consumer's session closed",
      );
      const closed = records.find((r) => r.event.body.case === "sessionClosed")?.event.body;
      assert.ok(closed?.case === "sessionClosed");
      assert.equal(closed.value.reason, SessionClosed_Reason.SLOW_CONSUMER);
      assert.match(closed.value.detail, /messages behind/);
      const dropped = await gw.metrics.disconnects.get();
      assert.equal(dropped.values.find((v) => v.labels.reason === "SLOW_CONSUMER")?.value, 1);
    } finally {
      agent?.abort();
      await on.close();
    }
  });

  it("closes streams with Unavailable when the log stays unreachable past the limit", async () => {
    const on = await startGatewayOnNewLog(server.url, "GWDOWN", {
      certs,
      publishTimeoutMs: 500,
      logUnavailableLimitMs: 1_500,
      heartbeatTimeoutMs: 60_000,
    });
    const { gw } = on;
    const agents: TestAgent[] = [];
    try {
      for (const node of ["gpu-down-1", "gpu-down-2"]) {
        agents.push(
          await TestAgent.connect({
            baseUrl: gw.url,
            tls: { ca: certs.ca, ...certs.client(node) },
            registration: h100Registration(node),
          }),
        );
      }
      await server.stop();
      // One agent has something to record, the other is idle: both go.
      agents[0]!.shardStatus({ shardId: "s", state: ShardStatus_State.FAILED, error: "CUDA out of memory" });
      for (const a of agents) {
        const err = await a.ended;
        assert.equal(codeOf(err), "Unavailable", String(err));
      }
      const rejected = await gw.metrics.disconnects.get();
      assert.equal(rejected.values.find((v) => v.labels.reason === "LOG_UNAVAILABLE")?.value, 2);
    } finally {
      for (const a of agents) a.abort();
      if (!server.running) await server.restart();
      await on.close();
    }
  });
});
