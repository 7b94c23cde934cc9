/**
 * End to end through every real part: a gateway (insecure-dev), test agents
 * over Connect, a `llmgw reconciler` process and a real nats-server.
 * Skipped, saying why, while decide places nothing.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { Gateway } from "../../src/gateway/index.js";
import { ShardStatus_State } from "../../src/gen/llmgw/v1/agent_pb.js";
import { Liveness } from "../../src/gen/llmgw/v1/events_pb.js";
import { type Log, openLog } from "../../src/log/index.js";
import { foldFleet } from "../../src/projections/index.js";
import { type NatsServer, startServer, uniqueStream } from "../harness/nats.js";
import { type ReceivedCommand, TestAgent } from "../support/agent.js";
import { eventually } from "../support/eventually.js";
import { EventFactory, h100Node, llamaCatalog, type RunningInit } from "../support/fleet-events.js";
import { rand, readAll, startTestGateway } from "../support/gateway.js";
import { passesOf, passViolations } from "../support/pass-invariants.js";
import { killAll, type ReconcilerProcess, spawnReconciler } from "../support/reconciler.js";

type Start = Extract<ReceivedCommand, { case: "start" }>["value"];

describe("reconciler end to end: gateway, agents, log", () => {
  let server: NatsServer & { close(): Promise<void> };
  before(async () => {
    server = await startServer();
  });
  after(async () => {
    await server?.close();
  });

  it("places, starts, adopts, re-places and stops duplicates", async () => {
    const stream = uniqueStream("E2E");
    const prefix = `e${rand()}.evt`;
    const leaseBucket = `gwl_${rand()}`;
    const log: Log = await openLog({ url: server.url, clientName: "test", name: stream, prefix });
    const f = new EventFactory(`e2e-${rand()}`);
    let gw: Gateway | undefined;
    let rec: ReconcilerProcess | undefined;
    const agents = new Map<string, TestAgent>();
    const state = async () => {
      const records = await readAll(log);
      return foldFleet(records);
    };
    /** An agent that answers commands and reports started shards running, as a real one would. */
    const connect = (node: string, running: RunningInit[] = []) => {
      const agent: TestAgent = TestAgent.open({
        baseUrl: gw!.url,
        registration: h100Node(node, { running }),
        autoAnswer: (cmd: ReceivedCommand) => {
          if (cmd.case === "start") {
            setTimeout(() => {
              agent.shardStatus({
                replicaId: cmd.value.replicaId,
                shardId: cmd.value.shardId,
                state: ShardStatus_State.RUNNING,
              });
            }, 10);
          }
          return { ok: true };
        },
      });
      agents.set(node, agent);
      return agent;
    };
    // Agents heartbeat like real ones; a silenced one stops.
    const silenced = new Set<TestAgent>();
    const beat = setInterval(() => {
      for (const a of agents.values()) {
        if (silenced.has(a)) continue;
        try {
          a.heartbeat({});
        } catch {
          // a closed stream
        }
      }
    }, 300);
    const startsTo = (node: string): Start[] =>
      (agents.get(node)?.commands() ?? []).flatMap((c) => (c.case === "start" ? [c.value] : []));
    try {
      gw = await startTestGateway({
        nats: server.url,
        stream,
        prefix,
        leaseBucket,
        heartbeatTimeoutMs: 1500,
      });
      rec = await spawnReconciler({
        id: "rec-e2e",
        nats: server.url,
        stream,
        prefix,
        leaseBucket: `rl_${rand()}`,
        gatewaysBucket: leaseBucket,
        // Spread: one replica per node, so a lost node leaves room on the other.
        config: { policy: "spread", suspectAfterMs: 1000, lostAfterMs: 2500, commandTimeoutMs: 5000 },
      });
      connect("gpu-a1");
      connect("gpu-a2");
      await log.append(f.catalog(llamaCatalog(2, 0)));

      // Catalog applied → placed → start commands reach the agents → running.
      await eventually(async () => startsTo("gpu-a1").length + startsTo("gpu-a2").length >= 2, {
        what: `start commands at the agents:\n${rec.output()}`,
      });
      await eventually(
        async () =>
          (await state()).replicas.replicas.values().filter((r) => r.phase === "running").length === 2,
        { what: "two replicas running" },
      );

      // An agent restarted with its shards running: adopted, nothing restarted.
      const node = startsTo("gpu-a1").length > 0 ? "gpu-a1" : "gpu-a2";
      const running: RunningInit[] = startsTo(node).map((s) => ({
        shard: s.shardId,
        replica: s.replicaId,
        model: s.model,
        profile: s.profile,
        gpus: [...s.gpuIndices],
      }));
      await agents.get(node)!.close();
      const back = connect(node, running);
      await eventually(
        async () =>
          passesOf(await readAll(log)).some((p) =>
            p.pass.decisions.some((d) => d.kind.case === "shardsAdopted" && d.kind.value.nodeId === node),
          ),
        { what: `${node}'s shards adopted` },
      );
      // Read from the log, not after a sleep at the agent: every pass up to and
      // including the adoption is there, and none starts a shard on the node
      // after its new session opened.
      const afterAdoption = await readAll(log);
      const reopenedAt = afterAdoption.findLast(
        (r) => r.event.body.case === "sessionOpened" && r.event.body.value.nodeId === node,
      )!.seq;
      assert.deepEqual(
        passesOf(afterAdoption)
          .filter((p) => p.seq > reopenedAt)
          .flatMap((p) => p.pass.commands.filter((c) => c.nodeId === node && c.action.case === "start"))
          .map((c) => c.commandId),
        [],
        "nothing restarted on the adopted node",
      );
      assert.deepEqual(
        back.commands().filter((c: ReceivedCommand) => c.case === "start"),
        [],
        "nothing restarted on the adopted node (at the agent)",
      );

      // It reconnects running nothing: its replicas are placed again.
      await back.close();
      const empty = connect(node);
      await eventually(
        async () =>
          empty.commands().some((c: ReceivedCommand) => c.case === "start") ||
          startsTo(other(node)).length > running.length,
        {
          what: `${node}'s replicas placed again`,
        },
      );

      // A node going silent: suspect, lost, re-placed; when it returns, duplicates are stopped.
      const silent = other(node);
      const before = [...new Map(startsTo(silent).map((s) => [s.shardId, s])).values()];
      silenced.add(agents.get(silent)!);
      agents.get(silent)!.abort();
      await eventually(
        async () =>
          passesOf(await readAll(log)).some((p) =>
            p.pass.decisions.some(
              (d) =>
                d.kind.case === "nodeLiveness" &&
                d.kind.value.nodeId === silent &&
                d.kind.value.liveness === Liveness.LOST,
            ),
          ),
        { what: `${silent} suspect then lost` },
      );
      const movedReplicas = new Set(before.map((b) => b.replicaId));
      await eventually(
        async () =>
          empty
            .commands()
            .some((c: ReceivedCommand) => c.case === "start" && movedReplicas.has(c.value.replicaId)),
        { what: `the replicas of lost ${silent} re-placed on ${node}` },
      );
      const returned = connect(
        silent,
        before.map((s) => ({
          shard: s.shardId,
          replica: s.replicaId,
          model: s.model,
          profile: s.profile,
          gpus: [...s.gpuIndices],
        })),
      );
      await eventually(async () => returned.commands().some((c: ReceivedCommand) => c.case === "stop"), {
        what: `duplicates on ${silent} stopped`,
      }).catch(async (err) => {
        const tail = passesOf(await readAll(log)).slice(-4);
        const seen = tail.map((p) =>
          p.pass.decisions.map((d) => `${d.kind.case}: ${d.explanation}`).join("\n  "),
        );
        throw new Error(`${(err as Error).message}\nlast passes:\n  ${seen.join("\n  --\n  ")}`);
      });
      assert.deepEqual(passViolations(await readAll(log)), []);
    } finally {
      clearInterval(beat);
      for (const a of agents.values()) a.abort();
      await killAll([rec]);
      await gw?.drain("test over");
      await log.jsm.streams.delete(stream).catch(() => {});
      await log.close();
    }
  });
});

function other(node: string): string {
  return node === "gpu-a1" ? "gpu-a2" : "gpu-a1";
}
