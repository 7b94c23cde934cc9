/**
 * A reconnect storm: every agent of a fleet reconnects at the same moment
 * (a fleet-wide agent restart, keeping its shards) against two `llmgw
 * gateway` processes and a `llmgw reconciler`. Every agent gets a session
 * again, its running shards are adopted (no shard is started again), and
 * the log keeps every invariant, every acknowledged message included.
 *
 * 300 agents by default; LLMGW_CHAOS_STORM_AGENTS=1000 for the full storm.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { type NatsServer, startServer } from "../harness/nats.js";
import { ChaosWorld } from "../support/chaos.js";
import { eventually } from "../support/eventually.js";

const AGENTS = Number(process.env["LLMGW_CHAOS_STORM_AGENTS"] ?? 300);
/** One one-GPU replica per two agents: half the fleet runs something to adopt. */
const REPLICAS = Math.ceil(AGENTS / 2);

describe(`chaos: a reconnect storm of ${AGENTS} agents`, () => {
  let server: NatsServer & { close(): Promise<void> };
  let w: ChaosWorld;

  before(async () => {
    server = await startServer();
    w = await new ChaosWorld({
      nats: server.url,
      gateways: 2,
      reconcilers: 1,
      heartbeatTimeoutMs: 5_000,
      // A big fleet: slower heartbeats keep the machine for the storm itself.
      sim: { heartbeatMs: 1_000, reconnectMinMs: 200, reconnectMaxMs: 2_000, ackTimeoutMs: 20_000 },
    }).start();
    await w.addAgents(AGENTS, "storm-");
    await w.waitConnected(AGENTS, "storm-", 120_000);
    await w.catalog(REPLICAS);
    await w.waitRunning(REPLICAS, 120_000);
  });
  after(async () => {
    await w?.close();
    await server?.close();
  });

  it("every agent reconnects at once: all sessions back, shards adopted, nothing restarted", async () => {
    const fleet = w.fleets[0]!;
    const before = new Map(
      Object.values(w.rt.state.inventory.nodes).map((n) => [n.nodeId, n.session?.sessionId]),
    );
    const stormSeq = await w.log.lastSeq();
    for (const a of fleet.nodes()) fleet.restartNode(a.nodeId, { keepShards: true });
    await eventually(
      () =>
        Object.values(w.rt.state.inventory.nodes).filter(
          (n) => n.session !== null && n.session.sessionId !== before.get(n.nodeId),
        ).length === AGENTS,
      {
        what: `all ${AGENTS} agents on a new session (have ${w.connected("storm-")} connected)`,
        timeoutMs: 120_000,
      },
    );
    await w.waitRunning(REPLICAS, 60_000);
    assert.deepEqual(await w.startsAfter(stormSeq), [], "no shard was started again after the storm");
    await w.check(`a reconnect storm of ${AGENTS} agents`);
  });
});
