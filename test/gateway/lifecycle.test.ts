import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Gateway } from "../../src/gateway/index.js";
import { ShardStatus_State } from "../../src/gen/llmgw/v1/agent_pb.js";
import { SessionClosed_Reason } from "../../src/gen/llmgw/v1/events_pb.js";
import type { Log, LogRecord } from "../../src/log/index.js";
import { codeOf, type Protocol, TestAgent } from "../support/agent.js";
import { testPass } from "../support/fleet-events.js";
import { readAll, type TestGatewayOptions, waitForLog } from "../support/gateway.js";
import { assertLogInvariants } from "../support/invariants.js";
import { h100Registration } from "../support/sample-events.js";
import { serverSuite, startGatewayOnNewLog } from "../support/suites.js";

/** Appends a reconciler pass carrying one start command, as the reconciler would. */
async function appendStart(log: Log, nodeId: string, sessionId: string, commandId: string) {
  return await log.append(
    testPass(`pass-${commandId}`, {
      trigger: "events",
      commands: [
        {
          commandId,
          nodeId,
          sessionId,
          attempt: 1,
          action: {
            case: "start",
            value: {
              shardId: `${commandId}-s0`,
              replicaId: "llama-70b-r1",
              model: "llama-3.3-70b",
              profile: "tp4",
              gpuIndices: [4, 5, 6, 7],
              worldSize: 1,
            },
          },
        },
      ],
    }),
  );
}

export function sessionOf(records: LogRecord[], nodeId: string): string {
  const opened = records.filter(
    (r) => r.event.body.case === "sessionOpened" && r.event.body.value.nodeId === nodeId,
  );
  const last = opened.at(-1)?.event.body;
  if (last?.case !== "sessionOpened") throw new Error(`no session opened for ${nodeId}`);
  return last.value.sessionId;
}

describe("gateway: one agent stream through the real log", () => {
  const env = serverSuite();

  async function withGateway(
    fn: (gw: Gateway, log: Log) => Promise<void>,
    over: Partial<TestGatewayOptions> = {},
  ) {
    const on = await startGatewayOnNewLog(env.server.url, "GW", { certs: env.certs, ...over });
    try {
      await fn(on.gw, on.log);
    } finally {
      await on.close();
    }
  }

  const agentTls = env.tls;

  /** An agent of `node` running nothing, registered with or without cumulative acks. */
  const ackingAgent = (gw: Gateway, node: string, cumulativeAcks: boolean) =>
    TestAgent.connect({
      baseUrl: gw.url,
      tls: agentTls(node),
      registration: { ...h100Registration(node, []), cumulativeAcks },
    });

  /** The message ids the agent's acks named, as they came (the registration's left out). */
  const ackedIds = (agent: TestAgent) =>
    agent.received.flatMap((m) =>
      m.msg.case === "ack" && m.msg.value.messageId !== "register" ? [Number(m.msg.value.messageId)] : [],
    );

  // Binary gRPC and Connect streams are framed directly unless the gateway
  // is told to leave everything to Connect's handler; gRPC-Web always is.
  const cases: Array<{ protocol: Protocol; directStreams: boolean; path: "direct" | "connect" }> = [
    { protocol: "connect", directStreams: true, path: "direct" },
    { protocol: "grpc", directStreams: true, path: "direct" },
    { protocol: "grpc-web", directStreams: true, path: "connect" },
    { protocol: "connect", directStreams: false, path: "connect" },
    { protocol: "grpc", directStreams: false, path: "connect" },
  ];
  for (const { protocol, directStreams, path } of cases) {
    it(`registers, reports, receives a command and answers it (${protocol}, framed by ${path === "direct" ? "the gateway" : "Connect's handler"})`, () =>
      withGateway(
        async (gw, log) => {
          const node = `gpu-${protocol}-a1`;
          const agent = await TestAgent.connect({
            baseUrl: gw.url,
            protocol,
            tls: agentTls(node),
            registration: h100Registration(node, [{ shard: "sh-1", replica: "r-1", gpus: [0, 1, 2, 3] }]),
            autoAnswer: true,
          });
          try {
            agent.heartbeat({ gpuMemoryUsedMb: Array(8).fill(100n) });
            const st = agent.shardStatus({
              replicaId: "r-1",
              shardId: "sh-1",
              state: ShardStatus_State.RUNNING,
            });
            await agent.waitForAck(st);
            const sessionId = sessionOf(await readAll(log), node);
            await appendStart(log, node, sessionId, `cmd-${protocol}`);
            const cmd = await agent.waitFor((m) => m.msg.case === "start");
            assert.equal(cmd.msg.case === "start" && cmd.msg.value.commandId, `cmd-${protocol}`);
            await waitForLog(
              log,
              (rs) => rs.some((r) => r.event.body.case === "commandResult"),
              "the command result",
            );
            assert.equal(codeOf(await agent.close()), "OK");
            const records = await waitForLog(
              log,
              (rs) => rs.some((r) => r.event.body.case === "sessionClosed"),
              "the session closed",
            );
            assert.deepEqual(
              records.map((r) => r.event.body.case),
              [
                "gatewayStarted",
                "sessionOpened",
                "shardStatus",
                "reconcilePass",
                "commandResult",
                "sessionClosed",
              ],
            );
            // The start, as gatewayStartedEvent builds it (the simulated gateway's too): address, version, lease.
            const started = records[0]!.event;
            assert.equal(started.body.case, "gatewayStarted");
            if (started.body.case === "gatewayStarted") {
              assert.equal(started.body.value.gatewayId, started.writer?.id);
              assert.match(started.body.value.listenAddress, /^https?:\/\/127\.0\.0\.1:\d+/);
              assert.ok(started.body.value.leaseTtlMs > 0);
              assert.equal(started.id, `gw-${started.writer?.id}-${started.timeUnixMs}-started`);
            }
            const opened = records[1]!.event.body;
            assert.ok(opened.case === "sessionOpened");
            assert.equal(opened.value.identity, "mtls");
            assert.equal(opened.value.gatewayId, gw.config.id);
            assert.deepEqual(
              opened.value.registration?.runningShards.map((s) => s.shardId),
              ["sh-1"],
            );
            assert.equal(records[1]!.event.id, `${sessionId}-1`);
            // The heartbeat (message 2) stayed within the threshold: no event, but it took its sequence.
            assert.equal(records[2]!.event.id, `${sessionId}-3`);
            const result = records[4]!.event.body;
            assert.ok(result.case === "commandResult");
            assert.equal(result.value.result?.commandId, `cmd-${protocol}`);
            assert.equal(result.value.sessionSeq, 4n);
            const closed = records[5]!.event.body;
            assert.ok(closed.case === "sessionClosed");
            assert.equal(closed.value.reason, SessionClosed_Reason.DISCONNECTED);
            const metrics = await (await fetch(gw.metricsUrl!)).text();
            const family = protocol === "grpc-web" ? "grpc-web" : protocol;
            assert.match(
              metrics,
              new RegExp(
                `^llmgw_gateway_agent_streams_total\\{path="${path}",protocol="${family}"\\} 1$`,
                "m",
              ),
              "the stream was framed by the expected path",
            );
          } finally {
            agent.abort();
          }
        },
        { metricsListen: "127.0.0.1:0", directStreams },
      ));
  }

  it("cumulative acks under way wait for --ack-every stored messages, and a stream with nothing more on its way is acked at once", () =>
    withGateway(
      async (gw, log) => {
        const agent = await ackingAgent(gw, "gpu-ack-every", true);
        try {
          const status = (i: number) =>
            agent.shardStatus({ replicaId: "r-1", shardId: `sh-${i}`, state: ShardStatus_State.RUNNING });
          // The ack-later timer is out of reach (an hour): an ack comes only
          // for 16 stored messages, or once nothing more is on its way.
          const lone = status(0);
          await agent.waitForAck(lone);
          let last = lone;
          for (let i = 1; i <= 400; i++) last = status(i);
          await agent.waitForAck(last);
          const acks = ackedIds(agent);
          assert.equal(acks[0], lone, "the lone message is acked without waiting for the timer");
          assert.equal(acks.at(-1), last, "the last of the burst is acknowledged");
          assert.deepEqual(
            acks,
            [...acks].sort((a, b) => a - b),
            "acks come in the order of the messages",
          );
          // 400 messages: 25 acks of 16, plus one each time the stream had
          // nothing more on its way. Acking at the end of every turn of the
          // event loop wrote one for every few messages.
          const burst = acks.length - 1;
          assert.ok(burst <= 50, `${burst} acks for a burst of 400 (at most 50)`);
          const gaps = acks.slice(1).map((a, i) => a - acks[i]!);
          assert.ok(
            gaps.filter((g) => g >= 16).length >= 10,
            `most acks stand for 16 messages: gaps ${gaps.join(",")}`,
          );
          await assertLogInvariants(log, { acked: agent.acked(), what: "shard statuses with held acks" });
          assert.equal(agent.acked().length, 402, "the registration and 401 shard statuses");
        } finally {
          agent.abort();
        }
      },
      { ackEvery: 16, ackDelayMs: 3_600_000 },
    ));

  it("a usage event on its way does not hold back the ack of a stored message (it is acked for nothing)", () =>
    withGateway(
      async (gw, log) => {
        const agent = await ackingAgent(gw, "gpu-ack-usage", true);
        try {
          // A status, then a heartbeat whose memory moved past the threshold:
          // its usage event is published at once, right behind the status.
          const status = agent.shardStatus({
            replicaId: "r-1",
            shardId: "sh-1",
            state: ShardStatus_State.RUNNING,
          });
          agent.heartbeat({ gpuMemoryUsedMb: Array(8).fill(40_000n) });
          // With the ack-later timer out of reach, the ack comes only because
          // nothing the agent is acked for is behind the status.
          await agent.waitForAck(status, 5_000);
          const records = await waitForLog(
            log,
            (rs) => rs.some((r) => r.event.body.case === "usageChanged"),
            "the usage event",
          );
          assert.ok(records.some((r) => r.event.body.case === "shardStatus"));
        } finally {
          agent.abort();
        }
      },
      { ackEvery: 16, ackDelayMs: 3_600_000 },
    ));

  for (const cumulativeAcks of [true, false]) {
    it(`acknowledges a burst of messages ${cumulativeAcks ? "with cumulative acks, fewer than the messages" : "one ack per message (an agent without cumulative_acks)"}`, () =>
      withGateway(
        async (gw, log) => {
          const agent = await ackingAgent(gw, `gpu-burst-${cumulativeAcks}`, cumulativeAcks);
          try {
            // Shard statuses with a heartbeat now and then: heartbeats take a
            // position in the stream but are never acknowledged.
            let last = 0;
            for (let i = 0; i < 400; i++) {
              if (i % 50 === 25) agent.heartbeat({ gpuMemoryUsedMb: Array(8).fill(0n) });
              last = agent.shardStatus({
                replicaId: "r-1",
                shardId: `sh-${i}`,
                state: ShardStatus_State.RUNNING,
              });
            }
            await agent.waitForAck(last);
            const acks = ackedIds(agent);
            assert.deepEqual(
              acks,
              [...acks].sort((a, b) => a - b),
              "acks come in the order of the messages",
            );
            assert.equal(acks.at(-1), last, "the last message is acknowledged");
            if (cumulativeAcks) {
              assert.ok(
                acks.length < 400,
                `acks were merged while the gateway was writing (${acks.length} for 400)`,
              );
            } else {
              assert.equal(acks.length, 400, "one ack per shard status, none for heartbeats");
            }
            const text = await (await fetch(gw.metricsUrl!)).text();
            const coalesced = Number(
              /^llmgw_gateway_acks_total\{outcome="coalesced"\} (\d+)$/m.exec(text)?.[1] ?? 0,
            );
            assert.equal(coalesced, cumulativeAcks ? 400 - acks.length : 0);
            // Every message an ack stood for is in the log, in order, once.
            await assertLogInvariants(log, { acked: agent.acked(), what: "a burst of shard statuses" });
            assert.equal(agent.acked().length, 401, "the registration and 400 shard statuses");
          } finally {
            agent.abort();
          }
        },
        { metricsListen: "127.0.0.1:0" },
      ));
  }

  it("records an agent running nothing as an empty running-shards list", () =>
    withGateway(
      async (gw, log) => {
        const agent = await TestAgent.connect({
          baseUrl: gw.url,
          tls: agentTls("gpu-idle-1"),
          registration: h100Registration("gpu-idle-1", []),
        });
        try {
          const records = await readAll(log);
          const opened = records.find((r) => r.event.body.case === "sessionOpened")?.event.body;
          assert.ok(opened?.case === "sessionOpened");
          assert.equal(opened.value.nodeId, "gpu-idle-1");
          assert.ok(opened.value.registration, "the registration is in the event");
          assert.deepEqual(opened.value.registration.runningShards, []);
          assert.equal(opened.value.registration.gpus.length, 8);
          // The Prometheus endpoint shows the open stream.
          assert.ok(gw.metricsUrl);
          const text = await (await fetch(gw.metricsUrl)).text();
          assert.match(text, /^llmgw_gateway_open_streams 1$/m);
          assert.match(text, /^llmgw_gateway_events_published_total\{kind="sessionOpened"\} 1$/m);
          // Every publish acked so far (the session-opened event among them) is observed once.
          const latency = (line: string) =>
            Number(new RegExp(`^llmgw_gateway_publish_latency_seconds_${line} (\\S+)$`, "m").exec(text)?.[1]);
          const published = [
            ...text.matchAll(/^llmgw_gateway_events_published_total\{kind="\w+"\} (\d+)$/gm),
          ];
          assert.equal(
            latency("count"),
            published.reduce((n, m) => n + Number(m[1]), 0),
          );
          assert.equal(latency('bucket\\{le="\\+Inf"\\}'), latency("count"));
          assert.ok(latency("sum") > 0);
        } finally {
          agent.abort();
        }
      },
      { metricsListen: "127.0.0.1:0" },
    ));

  it("appends usage only past the threshold or on a new problem; silence closes the session", () =>
    withGateway(
      async (gw, log) => {
        const node = "gpu-usage-1";
        const agent = await TestAgent.connect({
          baseUrl: gw.url,
          tls: agentTls(node),
          registration: h100Registration(node, []),
        });
        try {
          const mib = (n: number) => Array(8).fill(BigInt(n));
          agent.heartbeat({ gpuMemoryUsedMb: mib(500) }); // 2: within 1024 of 0
          agent.heartbeat({ gpuMemoryUsedMb: mib(1000) }); // 3: within
          agent.heartbeat({ gpuMemoryUsedMb: mib(72_000) }); // 4: engine loaded: usage
          agent.heartbeat({ gpuMemoryUsedMb: mib(72_500) }); // 5: within
          agent.heartbeat({ newProblems: ["Xid 79: GPU has fallen off the bus"] }); // 6: problem
          agent.heartbeat({ newProblems: ["Xid 79: GPU has fallen off the bus"] }); // 7: known
          const st = agent.shardStatus({ shardId: "x", state: ShardStatus_State.STOPPED }); // 8
          await agent.waitForAck(st);
          // Then the agent goes silent.
          const err = await agent.ended;
          assert.equal(codeOf(err), "DeadlineExceeded");
          const records = await waitForLog(
            log,
            (rs) => rs.some((r) => r.event.body.case === "sessionClosed"),
            "the silent close",
          );
          const session = sessionOf(records, node);
          const usage = records.filter((r) => r.event.body.case === "usageChanged");
          assert.deepEqual(
            usage.map((r) => r.event.id),
            [`${session}-4`, `${session}-6`],
          );
          const closed = records.at(-1)?.event.body;
          assert.ok(closed?.case === "sessionClosed");
          assert.equal(closed.value.reason, SessionClosed_Reason.SILENT);
          assert.equal(gw.registry.size, 0);
        } finally {
          agent.abort();
        }
      },
      { heartbeatTimeoutMs: 1_500 },
    ));
});
