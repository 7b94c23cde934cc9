import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { AgentConnection, type ConnectionEvent } from "../../src/agent/client/index.js";
import { ShardStatus_State } from "../../src/gen/llmgw/v1/agent_pb.js";
import type { LogRecord } from "../../src/log/index.js";
import { codeOf, TestAgent } from "../support/agent.js";
import type { TestCerts } from "../support/certs.js";
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

const RETRY_AFTER_MS = 300;
/** Refusals the duplicate must have had while the first agent is checked. */
const ATTEMPTS = 3;

/** A first agent that heartbeats every `everyMs` (so it counts as live) and reports shards on demand. */
async function liveAgent(gw: GatewayProcess, tls: { ca: string; cert: string; key: string }, node: string) {
  const a = await TestAgent.connect({
    baseUrl: gw.url,
    tls,
    registration: { ...h100Registration(node), instanceId: `first-${rand()}`, cumulativeAcks: true },
  });
  const beat = setInterval(() => a.heartbeat({ gpuMemoryUsedMb: [0n] }), 250);
  return {
    agent: a,
    stop() {
      clearInterval(beat);
      a.abort();
    },
    /** The gateway still takes and acknowledges what the first agent says, on its first session. */
    async assertServed(sessionId: string) {
      assert.equal(a.done, false, "the first agent's stream ended");
      await a.waitForAck(a.shardStatus({ shardId: `s-${rand()}`, state: ShardStatus_State.RUNNING }), 10_000);
      assert.equal(a.sessionId, sessionId);
    },
  };
}

/** The second agent: the real agent client (the simulator's and the node agent's), same certificate. */
function duplicateAgent(urls: string[], tls: { ca: string; cert: string; key: string }, node: string) {
  const events: ConnectionEvent[] = [];
  const conn = new AgentConnection({
    gateways: urls,
    protocol: "connect",
    tls: () => ({ ca: Buffer.from(tls.ca), cert: Buffer.from(tls.cert), key: Buffer.from(tls.key) }),
    ackTimeoutMs: 5_000,
    heartbeatMs: 250,
    reconnectMinMs: 50,
    reconnectMaxMs: 200,
    random: Math.random,
    registration: () => h100Registration(node),
    heartbeat: () => ({ gpuMemoryUsedMb: [0n] }),
    onControl: () => {},
    onEvent: (e) => events.push(e),
    resendUnacked: false,
  });
  conn.start();
  return {
    conn,
    /** Times the gateway told it to back off for the duplicate retry window. */
    backoffs: () =>
      events.filter((e) => e.type === "disconnected" && e.retryAfterMs === RETRY_AFTER_MS).length,
    registered: () => events.some((e) => e.type === "registered"),
  };
}

/** A gateway on the log that tells duplicates to retry after RETRY_AFTER_MS. */
function gatewayRetryingDuplicates(
  id: string,
  nats: string,
  stream: string,
  prefix: string,
  revoked: string,
) {
  return gatewayArgs(
    { id, nats, stream, prefix, revokedBucket: revoked },
    ...["--duplicate-retry-after", String(RETRY_AFTER_MS)],
  );
}

/** Starts a gateway retrying duplicates for each id, pushing each to `into` as it starts (a failed start leaves the others to stop). */
async function spawnGatewaysRetryingDuplicates(
  into: GatewayProcess[],
  ids: string[],
  o: { nats: string; stream: string; prefix: string; revoked: string; certs: TestCerts },
): Promise<void> {
  for (const id of ids)
    into.push(
      await spawnGateway(gatewayRetryingDuplicates(id, o.nats, o.stream, o.prefix, o.revoked), o.certs),
    );
}

function opened(records: LogRecord[], node: string) {
  return records.flatMap((r) =>
    r.event.body.case === "sessionOpened" && r.event.body.value.nodeId === node ? [r.event.body.value] : [],
  );
}

function duplicates(records: LogRecord[], node: string) {
  return records.flatMap((r) =>
    r.event.body.case === "duplicateIdentity" && r.event.body.value.nodeId === node
      ? [r.event.body.value]
      : [],
  );
}

describe("two agents presenting one identity", () => {
  const env = serverSuite();

  it("on one gateway: the newcomer is backed off and reported (event, metric, warning naming both peers), the first keeps its stream; once the first is gone the other takes over", async () => {
    const { log, stream, prefix, close } = await openTestLog(env.server.url, "GWDUP");
    const node = "gpu-dup-1";
    const tls = env.tls(node);
    let gw: GatewayProcess | undefined;
    let first: Awaited<ReturnType<typeof liveAgent>> | undefined;
    let second: ReturnType<typeof duplicateAgent> | undefined;
    try {
      gw = await spawnGateway(
        gatewayRetryingDuplicates("gw-dup", env.server.url, stream, prefix, `revoked_${rand()}`),
        env.certs,
      );
      first = await liveAgent(gw, tls, node);
      const sessionId = first.agent.sessionId;
      second = duplicateAgent([gw.url], tls, node);
      const dup = second;
      await eventually(() => dup.backoffs() >= ATTEMPTS, {
        what: `the duplicate told to back off ${ATTEMPTS} times`,
        timeoutMs: 20_000,
      });
      await first.assertServed(sessionId);
      assert.equal(dup.registered(), false, "the duplicate never registered");

      const records = await waitForLog(log, (rs) => duplicates(rs, node).length > 0, "a DuplicateIdentity");
      assert.deepEqual(
        opened(records, node).map((o) => o.sessionId),
        [sessionId],
        "only the first agent's session opened",
      );
      const held = opened(records, node)[0]!;
      const d = duplicates(records, node)[0]!;
      assert.equal(d.heldSessionId, sessionId);
      assert.equal(d.heldGatewayId, "gw-dup");
      assert.equal(d.gatewayId, "gw-dup");
      assert.equal(d.heldRemoteAddress, held.remoteAddress);
      assert.match(d.heldRemoteAddress, /^127\.0\.0\.1:\d+$/);
      assert.match(d.newcomerRemoteAddress, /^127\.0\.0\.1:\d+$/);
      assert.notEqual(d.newcomerRemoteAddress, d.heldRemoteAddress);
      assert.equal(d.newcomerInstanceId, dup.conn.instanceId);
      assert.equal(d.retryAfterMs, RETRY_AFTER_MS);
      assert.ok(
        (await metricValue(gw.metricsUrl!, "llmgw_gateway_duplicate_identity_total", 'holder="local"')) >=
          ATTEMPTS,
      );
      const warning = gw
        .output()
        .split("\n")
        .find((l) => l.includes(`two agents present the identity of ${node}`));
      assert.ok(warning, gw.output());
      assert.ok(warning.includes(d.newcomerRemoteAddress) && warning.includes(d.heldRemoteAddress), warning);

      // The first agent dies (its connection drops, as a killed process's does): the other takes over.
      first.stop();
      await eventually(() => dup.conn.connected, { what: "the second agent registering", timeoutMs: 20_000 });
      const after = await readAll(log);
      assert.equal(opened(after, node).length, 2);
    } finally {
      first?.stop();
      await second?.conn.stop();
      gw?.proc.kill("SIGKILL");
      await gw?.exited;
      await close();
    }
  });

  it("across gateways: a newcomer on another gateway is backed off while the session is open in the log, and gets in once it closed", async () => {
    const { log, stream, prefix, close } = await openTestLog(env.server.url, "GWDUP2");
    const node = "gpu-dup-2";
    const tls = env.tls(node);
    const revoked = `revoked_${rand()}`;
    const gws: GatewayProcess[] = [];
    let first: Awaited<ReturnType<typeof liveAgent>> | undefined;
    let second: ReturnType<typeof duplicateAgent> | undefined;
    try {
      await spawnGatewaysRetryingDuplicates(gws, ["gw-dup-a", "gw-dup-b"], {
        nats: env.server.url,
        stream,
        prefix,
        revoked,
        certs: env.certs,
      });
      const [gwA, gwB] = gws as [GatewayProcess, GatewayProcess];
      first = await liveAgent(gwA, tls, node);
      const sessionId = first.agent.sessionId;
      second = duplicateAgent([gwB.url], tls, node);
      const dup = second;
      await eventually(() => dup.backoffs() >= ATTEMPTS, {
        what: `the duplicate told to back off ${ATTEMPTS} times by the other gateway`,
        timeoutMs: 20_000,
      });
      await first.assertServed(sessionId);
      const records = await waitForLog(log, (rs) => duplicates(rs, node).length > 0, "a DuplicateIdentity");
      const d = duplicates(records, node)[0]!;
      assert.equal(d.gatewayId, "gw-dup-b");
      assert.equal(d.heldGatewayId, "gw-dup-a");
      assert.equal(d.heldSessionId, sessionId);
      assert.equal(d.heldRemoteAddress, opened(records, node)[0]!.remoteAddress);
      assert.ok(
        (await metricValue(gwB.metricsUrl!, "llmgw_gateway_duplicate_identity_total", 'holder="remote"')) >=
          ATTEMPTS,
      );

      first.stop();
      await eventually(() => dup.conn.connected, {
        what: "the second agent registering on the other gateway",
        timeoutMs: 20_000,
      });
    } finally {
      first?.stop();
      await second?.conn.stop();
      for (const gw of gws) gw.proc.kill("SIGKILL");
      await Promise.all(gws.map((g) => g.exited));
      await close();
    }
  });

  it("a newcomer that sends no instance_id never takes over a live holder that has one (on this gateway or another)", async () => {
    const { log, stream, prefix, close } = await openTestLog(env.server.url, "GWDUP4");
    const node = "gpu-dup-4";
    const tls = env.tls(node);
    const revoked = `revoked_${rand()}`;
    const gws: GatewayProcess[] = [];
    let first: Awaited<ReturnType<typeof liveAgent>> | undefined;
    const newcomers: TestAgent[] = [];
    try {
      await spawnGatewaysRetryingDuplicates(gws, ["gw-dup-d", "gw-dup-e"], {
        nats: env.server.url,
        stream,
        prefix,
        revoked,
        certs: env.certs,
      });
      const [gwD, gwE] = gws as [GatewayProcess, GatewayProcess];
      first = await liveAgent(gwD, tls, node);
      const sessionId = first.agent.sessionId;
      const registration = { ...h100Registration(node), instanceId: "" };
      for (const gw of [gwD, gwE]) {
        const anon = TestAgent.open({ baseUrl: gw.url, tls, registration });
        newcomers.push(anon);
        assert.equal(codeOf(await anon.ended), "AlreadyExists", `refused on ${gw.url}`);
        assert.equal(anon.sessionId, "", "never registered");
      }
      await first.assertServed(sessionId);
      const records = await waitForLog(
        log,
        (rs) => duplicates(rs, node).length >= 2,
        "a DuplicateIdentity from each gateway",
      );
      assert.deepEqual(
        opened(records, node).map((o) => o.sessionId),
        [sessionId],
        "only the first agent's session opened",
      );
      const reports = duplicates(records, node);
      assert.deepEqual(
        reports.map((d) => [d.gatewayId, d.heldGatewayId, d.heldSessionId, d.newcomerInstanceId]),
        [
          ["gw-dup-d", "gw-dup-d", sessionId, ""],
          ["gw-dup-e", "gw-dup-d", sessionId, ""],
        ],
      );
    } finally {
      first?.stop();
      for (const a of newcomers) a.abort();
      for (const gw of gws) gw.proc.kill("SIGKILL");
      await Promise.all(gws.map((g) => g.exited));
      await close();
    }
  });

  it("the same agent process reconnecting (same instance_id) takes over its live session at once", async () => {
    const { stream, prefix, close } = await openTestLog(env.server.url, "GWDUP3");
    const node = "gpu-dup-3";
    let gw: GatewayProcess | undefined;
    const agents: TestAgent[] = [];
    try {
      gw = await spawnGateway(
        gatewayRetryingDuplicates("gw-dup-c", env.server.url, stream, prefix, `revoked_${rand()}`),
        env.certs,
      );
      const registration = { ...h100Registration(node), instanceId: "one-process" };
      const old = await TestAgent.connect({ baseUrl: gw.url, tls: env.tls(node), registration });
      agents.push(old);
      const again = await TestAgent.connect({ baseUrl: gw.url, tls: env.tls(node), registration });
      agents.push(again);
      assert.equal(codeOf(await old.ended), "Aborted", "the old stream is superseded");
      await again.waitForAck(again.shardStatus({ shardId: "s", state: ShardStatus_State.RUNNING }));
    } finally {
      for (const a of agents) a.abort();
      gw?.proc.kill("SIGKILL");
      await gw?.exited;
      await close();
    }
  });
});
